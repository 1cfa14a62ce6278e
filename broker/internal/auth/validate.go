package auth

import (
	"fmt"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

// Input limits (docs/internals/http-api.md §1.7).
const (
	MaxUsernameLen = 64  // bytes; ^[A-Za-z0-9._-]{1,64}$
	MaxPasswordLen = 72  // bytes; bcrypt ignores everything past 72, so longer is refused
	MaxPatternLen  = 256 // bytes: 255 name characters plus an optional trailing '*'

	// DefaultBcryptCost is the work factor of stored password hashes (2^10 rounds).
	DefaultBcryptCost = 10
)

// HashPassword returns the bcrypt hash of pw. cost <= 0 means DefaultBcryptCost. A password
// that breaks ValidatePassword, or a cost bcrypt refuses, yields an error wrapping ErrInvalid.
func HashPassword(pw string, cost int) (string, error) {
	if err := ValidatePassword(pw); err != nil {
		return "", err
	}
	if cost <= 0 {
		cost = DefaultBcryptCost
	}
	if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
		return "", fmt.Errorf("%w: bcrypt cost %d outside %d…%d", ErrInvalid, cost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return "", fmt.Errorf("%w: hash password: %v", ErrInvalid, err)
	}
	return string(h), nil
}

// nameByte reports whether c may appear in a username, topic name or grant pattern.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func allNameBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// ValidateUsername enforces ^[A-Za-z0-9._-]{1,64}$; otherwise the error wraps ErrInvalid.
func ValidateUsername(name string) error {
	if name == "" || len(name) > MaxUsernameLen || !allNameBytes(name) {
		return fmt.Errorf("%w: username must be 1-%d characters of A-Z a-z 0-9 . _ -", ErrInvalid, MaxUsernameLen)
	}
	return nil
}

// ValidatePassword enforces a length of 1…72 bytes (docs/internals/http-api.md §2.15: over-long is a
// 400, not a 500); otherwise the error wraps ErrInvalid.
func ValidatePassword(pw string) error {
	if pw == "" {
		return fmt.Errorf("%w: password must not be empty", ErrInvalid)
	}
	if len(pw) > MaxPasswordLen {
		return fmt.Errorf("%w: password longer than %d bytes", ErrInvalid, MaxPasswordLen)
	}
	return nil
}

// ValidatePattern enforces the grant pattern rule ^[A-Za-z0-9._-]{0,255}\*?$ and non-empty:
// a name prefix followed by at most one '*', which must be last. "*" alone is valid.
func ValidatePattern(p string) error {
	body := p
	if n := len(body); n > 0 && body[n-1] == '*' {
		body = body[:n-1]
	}
	if p == "" || len(body) > MaxPatternLen-1 || !allNameBytes(body) {
		return fmt.Errorf("%w: pattern %q must be 1-255 characters of A-Z a-z 0-9 . _ - with an optional trailing *", ErrInvalid, clip(p))
	}
	return nil
}

// ValidateGrants checks a grant list (docs/internals/http-api.md §2.15): the action is one of the four;
// produce/consume/create carry at least one pattern and every pattern is valid; admin carries
// none. An empty list is valid (a user with no rights). Errors wrap ErrInvalid and name the
// grant's index.
func ValidateGrants(gs []meta.Grant) error {
	for i, g := range gs {
		switch g.Action {
		case meta.ActionAdmin:
			if len(g.Patterns) != 0 {
				return fmt.Errorf("%w: grants[%d]: admin takes no patterns", ErrInvalid, i)
			}
		case meta.ActionProduce, meta.ActionConsume, meta.ActionCreate:
			if len(g.Patterns) == 0 {
				return fmt.Errorf("%w: grants[%d]: %s needs at least one pattern", ErrInvalid, i, g.Action)
			}
			for _, p := range g.Patterns {
				if err := ValidatePattern(p); err != nil {
					return fmt.Errorf("grants[%d]: %w", i, err)
				}
			}
		default:
			return fmt.Errorf("%w: grants[%d]: action %q is not one of produce, consume, create, admin", ErrInvalid, i, clip(g.Action))
		}
	}
	return nil
}

// clip bounds user input echoed into error messages.
func clip(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
