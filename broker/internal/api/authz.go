package api

import (
	"net/http"

	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
)

// caller is the authenticated user of r (the synthetic root admin when security is off).
func (s *server) caller(r *http.Request) *meta.User {
	if u := CallerFromContext(r.Context()); u != nil {
		return u
	}
	if !s.security {
		return rootCaller
	}
	// Unreachable: every non-exempt request is authenticated before routing. Fail closed.
	return &meta.User{}
}

// allows is the grant-based check (produce, consume, create): name-based, so it runs
// before the topic is looked up (docs/internals/http-api.md §1.3). With security off every check passes.
func (s *server) allows(u *meta.User, action, topic string) bool {
	return !s.security || auth.Allows(u, action, topic)
}

// canManage is the manage-right check: owner, admin or root (docs/internals/http-api.md §1.3).
func (s *server) canManage(u *meta.User, t meta.Topic) bool {
	return !s.security || auth.CanManage(u, t)
}

// isAdmin reports whether u holds admin (or is root); always true with security off.
func (s *server) isAdmin(u *meta.User) bool {
	return !s.security || auth.IsAdmin(u)
}
