package auth

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

func TestUsernameRuleIsCharsetAndLength(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"alice", true},
		{"A.b_c-9", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"with space", false},
		{"slash/name", false},
		{"star*", false},
		{"ünicode", false},
	}
	for _, c := range cases {
		err := ValidateUsername(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateUsername(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateUsername(%q) error %v does not wrap ErrInvalid", c.name, err)
		}
	}
}

func TestPasswordRuleIsOneTo72Bytes(t *testing.T) {
	cases := []struct {
		pw string
		ok bool
	}{
		{"p", true},
		{strings.Repeat("p", 72), true},
		{strings.Repeat("p", 73), false},
		{strings.Repeat("é", 36), true},  // 72 bytes
		{strings.Repeat("é", 37), false}, // 74 bytes: the limit is bytes, not runes
		{"", false},
	}
	for _, c := range cases {
		err := ValidatePassword(c.pw)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidatePassword(len %d) = %v, want ok=%v", len(c.pw), err, c.ok)
		}
	}
}

func TestHashPasswordRefusesOverlongPasswordAsInvalid(t *testing.T) {
	if _, err := HashPassword(strings.Repeat("p", 73), bcrypt.MinCost); !errors.Is(err, ErrInvalid) {
		t.Fatalf("HashPassword(73 bytes) = %v, want ErrInvalid", err)
	}
	if _, err := HashPassword("pw", bcrypt.MaxCost+1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("HashPassword(cost too high) = %v, want ErrInvalid", err)
	}
	h, err := HashPassword("secret", bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(h), []byte("secret")) != nil {
		t.Fatal("hash does not verify its own password")
	}
}

func TestPatternRuleAllowsOnlyOneTrailingStar(t *testing.T) {
	cases := []struct {
		p  string
		ok bool
	}{
		{"*", true},
		{"orders", true},
		{"orders*", true},
		{"orders.eu-1_x*", true},
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 255) + "*", true},
		{strings.Repeat("a", 256), false},
		{"", false},
		{"**", false},
		{"a*b", false},
		{"*a", false},
		{"a b*", false},
		{"a/b", false},
	}
	for _, c := range cases {
		err := ValidatePattern(c.p)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("ValidatePattern(%q) = %v, want ok=%v", c.p, err, c.ok)
		}
	}
}

func TestGrantValidationFollowsActionRules(t *testing.T) {
	cases := []struct {
		name string
		gs   []meta.Grant
		ok   bool
	}{
		{"empty list", nil, true},
		{"admin without patterns", []meta.Grant{{Action: "admin"}}, true},
		{"scoped with patterns", []meta.Grant{{Action: "produce", Patterns: []string{"a*"}}, {Action: "consume", Patterns: []string{"b"}}, {Action: "create", Patterns: []string{"*"}}}, true},
		{"admin with patterns", []meta.Grant{{Action: "admin", Patterns: []string{"*"}}}, false},
		{"produce without patterns", []meta.Grant{{Action: "produce"}}, false},
		{"consume with empty pattern", []meta.Grant{{Action: "consume", Patterns: []string{""}}}, false},
		{"create with bad pattern", []meta.Grant{{Action: "create", Patterns: []string{"ok", "a*b"}}}, false},
		{"unknown action", []meta.Grant{{Action: "delete", Patterns: []string{"x"}}}, false},
		{"action is case sensitive", []meta.Grant{{Action: "Admin"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateGrants(c.gs)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Fatalf("ValidateGrants = %v, want ok=%v", err, c.ok)
			}
		})
	}
}
