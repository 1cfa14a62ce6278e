// Package auth is Narad's client-plane security: password hashing and the input rules for
// usernames, passwords and grants (docs/internals/http-api.md §1.7, §2.15), RBAC decisions and the
// no-escalation rules (§1.3), and the HTTP Basic authenticator with its failed-login throttle
// and success cache (§1.2).
//
// The package decides; it stores nothing. Users come from a UserSource (the metastore), and the
// HTTP layer maps the sentinel errors below to statuses.
package auth

import (
	"errors"

	"narad.dev/broker/internal/errcode"
)

// Sentinel errors. Every error this package returns wraps exactly one of them.
var (
	// ErrUnauthenticated: no or malformed credentials, unknown user, wrong password (401). Unknown
	// user and wrong password are deliberately the same error.
	ErrUnauthenticated = errcode.ErrUnauthenticated
	// ErrThrottled: the failed-login bucket of the client address, or of the client address and
	// username, is empty (429).
	ErrThrottled = errcode.ErrThrottled
	// ErrUnavailable: the credential store cannot be used, e.g. a stored hash is corrupt (500).
	ErrUnavailable = errors.New("authentication unavailable")
	// ErrForbidden: authenticated but not allowed (403).
	ErrForbidden = errcode.ErrForbidden
	// ErrInvalid: a username, password, pattern or grant breaks the input rules (400). It is
	// errcode.ErrInvalid (as meta.ErrInvalid is), so one mapping covers every package.
	ErrInvalid = errcode.ErrInvalid
)
