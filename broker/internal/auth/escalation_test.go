package auth

import (
	"errors"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

var (
	rootUser  = &meta.User{Username: "admin", Root: true}
	opsAdmin  = &meta.User{Username: "ops", Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
	scopedDev = &meta.User{Username: "dev", Grants: []meta.Grant{
		{Action: meta.ActionProduce, Patterns: []string{"orders*", "audit"}},
		{Action: meta.ActionCreate, Patterns: []string{"team.a*"}},
	}}
)

func g(action string, patterns ...string) meta.Grant {
	return meta.Grant{Action: action, Patterns: patterns}
}

func TestNoEscalationWhenAssigningGrants(t *testing.T) {
	cases := []struct {
		name   string
		caller *meta.User
		grants []meta.Grant
		ok     bool
	}{
		{"root may grant admin", rootUser, []meta.Grant{g(meta.ActionAdmin)}, true},
		{"non-root admin may not grant admin", opsAdmin, []meta.Grant{g(meta.ActionAdmin)}, false},
		{"non-root admin may grant any scoped", opsAdmin, []meta.Grant{g(meta.ActionProduce, "*"), g(meta.ActionConsume, "x"), g(meta.ActionCreate, "y*")}, true},
		{"non-admin may grant an equal literal", scopedDev, []meta.Grant{g(meta.ActionProduce, "audit")}, true},
		{"non-admin may grant an equal wildcard", scopedDev, []meta.Grant{g(meta.ActionProduce, "orders*")}, true},
		{"non-admin may grant a narrower wildcard", scopedDev, []meta.Grant{g(meta.ActionProduce, "orders.eu*")}, true},
		{"non-admin may grant a literal under its wildcard", scopedDev, []meta.Grant{g(meta.ActionCreate, "team.alpha")}, true},
		{"non-admin may not broaden a literal", scopedDev, []meta.Grant{g(meta.ActionProduce, "audit*")}, false},
		{"non-admin may not broaden a wildcard", scopedDev, []meta.Grant{g(meta.ActionProduce, "order*")}, false},
		{"non-admin may not grant everything", scopedDev, []meta.Grant{g(meta.ActionProduce, "*")}, false},
		{"non-admin may not grant another action", scopedDev, []meta.Grant{g(meta.ActionConsume, "audit")}, false},
		{"non-admin may not grant admin", scopedDev, []meta.Grant{g(meta.ActionAdmin)}, false},
		{"one bad pattern refuses the list", scopedDev, []meta.Grant{g(meta.ActionProduce, "audit", "other")}, false},
		{"empty list is always fine", scopedDev, nil, true},
		{"nil caller refused", nil, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckGrantAssignment(c.caller, c.grants)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Fatalf("CheckGrantAssignment = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestSetGrantsRefusesSelfRootAndNonAdmin(t *testing.T) {
	bob := &meta.User{Username: "bob"}
	ops2 := &meta.User{Username: "ops2", Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
	scoped := []meta.Grant{g(meta.ActionConsume, "x*")}
	cases := []struct {
		name           string
		caller, target *meta.User
		grants         []meta.Grant
		ok             bool
	}{
		{"admin sets another user's grants", opsAdmin, bob, scoped, true},
		{"admin may not change own grants", opsAdmin, opsAdmin, scoped, false},
		{"root may not change own grants", rootUser, rootUser, []meta.Grant{g(meta.ActionAdmin)}, false},
		{"root grants are immutable", opsAdmin, rootUser, scoped, false},
		{"non-admin may not set grants", scopedDev, bob, []meta.Grant{g(meta.ActionProduce, "audit")}, false},
		{"escalation via set grants refused", opsAdmin, ops2, []meta.Grant{g(meta.ActionAdmin)}, false},
		{"root may make another admin", rootUser, bob, []meta.Grant{g(meta.ActionAdmin)}, true},
		{"clearing grants allowed", opsAdmin, ops2, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSetGrants(c.caller, c.target, c.grants)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Fatalf("CheckSetGrants = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestSetPasswordRulesSelfNeedsCurrentAndOnlyRootTouchesRoot(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("old-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	bob := &meta.User{Username: "bob", PasswordHash: string(hash)}
	carol := &meta.User{Username: "carol"}
	ops := &meta.User{Username: "ops", PasswordHash: string(hash), Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
	root := &meta.User{Username: "admin", Root: true, PasswordHash: string(hash)}
	cases := []struct {
		name           string
		caller, target *meta.User
		current        string
		have           bool
		want           error
	}{
		{"self with correct current", bob, bob, "old-pw", true, nil},
		{"self without current", bob, bob, "", false, ErrForbidden},
		{"self with wrong current", bob, bob, "nope", true, ErrForbidden},
		{"self with overlong current", bob, bob, string(make([]byte, 80)), true, ErrForbidden},
		{"non-admin on another user", bob, carol, "", false, ErrForbidden},
		{"admin on another user", ops, bob, "", false, nil},
		{"admin on self without current", ops, ops, "", false, nil},
		{"admin on self with wrong current", ops, ops, "nope", true, ErrForbidden},
		{"non-root admin on root", ops, root, "", false, ErrForbidden},
		{"root on root with current", root, root, "old-pw", true, nil},
		{"root on root without current", root, root, "", false, nil},
		{"corrupt stored hash", &meta.User{Username: "x", PasswordHash: "garbage"}, &meta.User{Username: "x", PasswordHash: "garbage"}, "pw", true, ErrUnavailable},
		{"nil caller", nil, bob, "", false, ErrForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckSetPassword(c.caller, c.target, c.current, c.have)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("CheckSetPassword = %v, want %v", err, c.want)
			}
		})
	}
}

func TestDeleteUserRefusesRootSelfAndNonAdmin(t *testing.T) {
	bob := &meta.User{Username: "bob"}
	cases := []struct {
		name           string
		caller, target *meta.User
		ok             bool
	}{
		{"admin deletes another user", opsAdmin, bob, true},
		{"root deletes an admin", rootUser, opsAdmin, true},
		{"root cannot be deleted", opsAdmin, rootUser, false},
		{"root cannot delete itself", rootUser, rootUser, false},
		{"nobody deletes own account", opsAdmin, opsAdmin, false},
		{"non-admin cannot delete", scopedDev, bob, false},
		{"nil caller", nil, bob, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckDeleteUser(c.caller, c.target)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrForbidden)) {
				t.Fatalf("CheckDeleteUser = %v, want ok=%v", err, c.ok)
			}
		})
	}
}
