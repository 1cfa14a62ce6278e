package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
)

// ErrTargetCheck is a remote attach whose target check failed (422, with a reason).
var ErrTargetCheck = errors.New("remote target check failed")

// targetReasons is the fixed set of reasons a failed remote target check answers, each with
// its fixed message: nothing of the target's answer (body, headers, certificate names) is
// ever echoed, so the check cannot be used to read an internal service.
var targetReasons = map[string]string{
	"target_unreachable":    "no target url answered",
	"tls_error":             "the TLS handshake with the target failed",
	"unauthorized":          "the target refused the credentials or the produce grant",
	"target_topic_missing":  "the target topic does not exist",
	"target_is_delay_child": "the target topic is a delay child",
	"redirect_refused":      "the target answered with a redirect; redirects are not followed",
	"bad_answer":            "the target did not answer as a Narad topic description",
	"not_allowed_host":      "a target host is not in --remote-allowed-hosts",
}

// TargetError is a failed attach-time check of a remote target. Reason is one of
// targetReasons; the message is that reason's fixed text.
type TargetError struct {
	Reason string
}

// NewTargetError returns the TargetError of reason; a reason outside the fixed set becomes
// bad_answer.
func NewTargetError(reason string) *TargetError {
	if _, ok := targetReasons[reason]; !ok {
		reason = "bad_answer"
	}
	return &TargetError{Reason: reason}
}

func (e *TargetError) Error() string {
	return "remote target check failed: " + e.Reason + ": " + targetReasons[e.Reason]
}
func (e *TargetError) Unwrap() error { return ErrTargetCheck }

// ErrorFields adds "reason" to the error body.
func (e *TargetError) ErrorFields() map[string]any { return map[string]any{"reason": e.Reason} }

// RemoteAttach is a validated remote attach request.
type RemoteAttach struct {
	Parent   string
	URLs     []string // scheme://host:port each, tried in order
	Topic    string
	User     string
	Password string
	DelayMs  int64
	Start    string // meta.Start*; "" = attach
}

// RemoteBackend is the remote-children half of the service layer (spec/fanout.md §13).
type RemoteBackend interface {
	// AttachRemote checks the target (TargetError), reads the start point (ErrUnavailable) and
	// proposes the link (ErrConflict over the children limit or for a duplicate id). It returns
	// the parent after the attach and the new link's listing entry.
	AttachRemote(ctx context.Context, req RemoteAttach) (meta.Topic, ChildStatus, error)
	// DetachRemote deletes parent's remote link id; ErrNotFound when there is none.
	DetachRemote(ctx context.Context, parent, id string) error
	// ResolveRemote maps a listing name or id of parent's remote link to its id.
	ResolveRemote(parent, ref string) (string, bool)
}

type remoteBody struct {
	URL      string `json:"url"`
	Topic    string `json:"topic"`
	User     string `json:"user"`
	Password string `json:"password"`
}

// validRemote checks a remote attach body (400 on any bad field).
func validRemote(parent string, b *remoteBody, delay int64, start string) (RemoteAttach, error) {
	urls, err := meta.ParseRemoteURLs(b.URL)
	switch {
	case err != nil:
		return RemoteAttach{}, invalidf("remote.url: %v", err)
	case b.Topic == "" || !validTopicName(b.Topic):
		return RemoteAttach{}, invalidf("remote.topic: invalid topic name %q", b.Topic)
	case b.User != "" && !meta.ValidUsername(b.User):
		return RemoteAttach{}, invalidf("remote.user: invalid username")
	case len(b.Password) > 72 || (b.User != "" && b.Password == ""):
		return RemoteAttach{}, invalidf("remote.password: 1 … 72 bytes with a user")
	case delay < 0 || delay > meta.MaxDelayMs:
		return RemoteAttach{}, invalidf("delay_ms must be 0 … %d", meta.MaxDelayMs)
	case !meta.ValidStart(start):
		return RemoteAttach{}, invalidf("start must be attach, consumer_frontier or oldest")
	}
	return RemoteAttach{Parent: parent, URLs: urls, Topic: b.Topic, User: b.User, Password: b.Password,
		DelayMs: delay, Start: start}, nil
}

// attachRemote is the remote form of POST /v1/topics/{parent}/children: body (400), manage
// right on the parent (403/404), then the admin grant (403: a remote link makes the broker
// connect to an address the caller chooses and carries data out of the cluster), then the
// backend's checks (422 with a fixed reason, 409, 503). The answer is the new link's listing
// entry.
func (s *server) attachRemote(w http.ResponseWriter, r *http.Request, b attachBody) {
	const op = "attach remote child"
	rb, ok := s.be.(RemoteBackend)
	if !ok {
		s.writeErr(w, r, op, errors.Join(ErrUnavailable, errors.New("remote children are not available on this node")))
		return
	}
	var delay int64
	if b.DelayMs != nil {
		delay = *b.DelayMs
	}
	parentName := r.PathValue("topic")
	if b.Child != "" {
		s.writeErr(w, r, op, invalidf("child and remote are exclusive"))
		return
	}
	req, err := validRemote(parentName, b.Remote, delay, b.Start)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if !s.manageParent(w, r, op, parentName) {
		return
	}
	if s.security && !auth.MayLinkRemote(s.caller(r)) {
		s.auditedErr(w, r, op, eventRemoteAttach, parentName, forbiddenf("remote children need the admin grant"))
		return
	}
	_, cs, err := rb.AttachRemote(r.Context(), req)
	if err != nil {
		s.auditedErr(w, r, op, eventRemoteAttach, parentName, err)
		return
	}
	s.audit(r, eventRemoteAttach, parentName, audit.OK, "child", cs.ID, "remote_url", strings.Join(req.URLs, ","),
		"remote_topic", req.Topic, "remote_user", req.User)
	writeJSON(w, http.StatusOK, cs)
}

// detachRemote is DELETE /v1/topics/{parent}/children/{ref} for a remote link (ref is its id
// or listing name): manage right on the parent.
func (s *server) detachRemote(w http.ResponseWriter, r *http.Request, parentName, ref string) {
	const op = "detach remote child"
	rb, ok := s.be.(RemoteBackend)
	if !ok {
		s.writeErr(w, r, op, notFoundf("no remote child %q", ref))
		return
	}
	if !s.manageParent(w, r, op, parentName) {
		return
	}
	id, found := rb.ResolveRemote(parentName, ref)
	if !found {
		s.writeErr(w, r, op, notFoundf("topic %q has no remote child %q", parentName, ref))
		return
	}
	if err := rb.DetachRemote(r.Context(), parentName, id); err != nil {
		s.auditedErr(w, r, op, eventRemoteDetach, parentName, err)
		return
	}
	s.audit(r, eventRemoteDetach, parentName, audit.OK, "child", id)
	writeEmpty(w, http.StatusNoContent)
}

// isRemoteRef reports whether a detach path segment names a remote link.
func isRemoteRef(child string) bool { return strings.HasPrefix(child, meta.RemotePrefix) }

// manageParent reports whether the caller may manage the existing topic name; otherwise it
// answers 403 (a known topic without the manage right) or the missing topic's 404/503.
func (s *server) manageParent(w http.ResponseWriter, r *http.Request, op, name string) bool {
	parent, ok := s.topic(r.Context(), name)
	switch {
	case ok && !s.canManage(s.caller(r), parent):
		s.writeErr(w, r, op, forbiddenf("no manage right on topic %q", name))
		return false
	case !ok:
		s.writeErr(w, r, op, s.topicMissing(name))
		return false
	}
	return true
}
