package api

import (
	"net"
	"net/http"

	"narad.dev/broker/internal/audit"
)

// Audit events of remote links (docs/operating.md, Audit events); the user events are in
// users.go.
const (
	eventRemoteAttach = "fanout.remote.attach"
	eventRemoteDetach = "fanout.remote.detach"
)

// audit records event about target for the caller of r (docs/operating.md, Audit events),
// with the client's address; outcome is one of the audit outcomes.
func (s *server) audit(r *http.Request, event, target, outcome string, attrs ...any) {
	actor := audit.ActorSecurityOff
	if s.security {
		actor = ""
		if u := CallerFromContext(r.Context()); u != nil {
			actor = u.Username
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	s.auditLog.Record(r.Context(), audit.Event{Name: event, Actor: actor, Target: target, Outcome: outcome,
		Attrs: append([]any{"client", host}, attrs...)})
}

// auditOutcome is the audit outcome of an audited request that failed with err: refused by a
// rule (403, 409) is denied, a proposal of unknown fate (503, 500) unknown, anything else
// failed with nothing changed.
func auditOutcome(err error) string {
	switch statusOf(err) {
	case http.StatusOK:
		return audit.OK
	case http.StatusForbidden, http.StatusConflict:
		return audit.Denied
	case http.StatusServiceUnavailable, http.StatusInternalServerError:
		return audit.Unknown
	}
	return audit.Failed
}
