package auth

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

// The checks below implement "no privilege escalation" (docs/internals/http-api.md §1.3 rules 1–4) and the
// user-endpoint permissions of §2.15. They assume the inputs already passed ValidateGrants /
// ValidatePassword (a 400 comes before these 403s) and that caller and target are the current
// stored records. Every refusal wraps ErrForbidden; a nil caller is always refused.

// CheckGrantAssignment decides whether caller may hand out grants (on user create and grant
// replacement):
//
//  1. only the root admin may hand out the admin action;
//  2. a non-root admin may hand out any scoped grant (produce/consume/create);
//  3. anyone else only grants it holds itself, each pattern covered by one of its own patterns
//     of the same action (a literal covers itself; "p*" covers anything starting with "p").
func CheckGrantAssignment(caller *meta.User, grants []meta.Grant) error {
	if caller == nil {
		return fmt.Errorf("%w: no caller", ErrForbidden)
	}
	admin := IsAdmin(caller)
	for i, g := range grants {
		if g.Action == meta.ActionAdmin {
			if !caller.Root {
				return fmt.Errorf("%w: grants[%d]: only the root admin may grant admin", ErrForbidden, i)
			}
			continue
		}
		if admin {
			continue
		}
		for _, p := range g.Patterns {
			if !holdsCovering(caller, g.Action, p) {
				return fmt.Errorf("%w: grants[%d]: %s on %q exceeds the caller's own grants", ErrForbidden, i, g.Action, clip(p))
			}
		}
	}
	return nil
}

// CheckSetGrants decides whether caller may replace target's grants with grants: the caller must
// be an admin, must not be the target (nobody changes their own grants), the target must not be
// root (root's grants are immutable), and CheckGrantAssignment must pass.
func CheckSetGrants(caller, target *meta.User, grants []meta.Grant) error {
	if !IsAdmin(caller) {
		return fmt.Errorf("%w: user management needs admin", ErrForbidden)
	}
	if target == nil {
		return fmt.Errorf("%w: no target", ErrForbidden)
	}
	if caller.Username == target.Username {
		return fmt.Errorf("%w: nobody may change their own grants", ErrForbidden)
	}
	if target.Root {
		return fmt.Errorf("%w: the root admin's grants are immutable", ErrForbidden)
	}
	return CheckGrantAssignment(caller, grants)
}

// CheckSetPassword decides whether caller may set target's password (docs/internals/http-api.md §2.15):
//
//   - only root may change root's password;
//   - another user's password: the caller must be an admin;
//   - one's own password: a non-admin must present the correct current password
//     (haveCurrent and currentPassword matching target.PasswordHash); an admin need not;
//   - a current password that is presented is always checked, also for admins, so a client
//     that sends one never has it silently ignored.
//
// A wrong current password costs one bcrypt comparison; throttling it is the caller's business.
func CheckSetPassword(caller, target *meta.User, currentPassword string, haveCurrent bool) error {
	if caller == nil || target == nil {
		return fmt.Errorf("%w: no caller or target", ErrForbidden)
	}
	if target.Root && !caller.Root {
		return fmt.Errorf("%w: only the root admin may change the root admin's password", ErrForbidden)
	}
	self := caller.Username == target.Username
	admin := IsAdmin(caller)
	if !self && !admin {
		return fmt.Errorf("%w: changing another user's password needs admin", ErrForbidden)
	}
	if self && !admin && !haveCurrent {
		return fmt.Errorf("%w: current_password is required", ErrForbidden)
	}
	if haveCurrent {
		if err := verifyPassword(target.PasswordHash, currentPassword); err != nil {
			return err
		}
	}
	return nil
}

// verifyPassword compares pw against a stored hash: nil on match, ErrForbidden on mismatch
// (or an over-long password, which bcrypt would otherwise silently truncate), ErrUnavailable on
// a corrupt hash.
func verifyPassword(hash, pw string) error {
	if len(pw) > MaxPasswordLen || pw == "" {
		return fmt.Errorf("%w: wrong current_password", ErrForbidden)
	}
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return fmt.Errorf("%w: wrong current_password", ErrForbidden)
	default:
		return fmt.Errorf("%w: stored password hash: %v", ErrUnavailable, err)
	}
}

// CheckDeleteUser decides whether caller may delete target: the caller must be an admin, the
// target must not be root, and nobody may delete their own account.
func CheckDeleteUser(caller, target *meta.User) error {
	if !IsAdmin(caller) {
		return fmt.Errorf("%w: user management needs admin", ErrForbidden)
	}
	if target == nil {
		return fmt.Errorf("%w: no target", ErrForbidden)
	}
	if target.Root {
		return fmt.Errorf("%w: the root admin cannot be deleted", ErrForbidden)
	}
	if caller.Username == target.Username {
		return fmt.Errorf("%w: nobody may delete their own account", ErrForbidden)
	}
	return nil
}
