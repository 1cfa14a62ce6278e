package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// RemoteBackend is the remote-children half of the service layer (docs/internals/fanout.md §13).
type RemoteBackend interface {
	// AttachRemote checks the target (TargetError), reads the start point (ErrUnavailable) and
	// proposes the link (ErrConflict over the children limit or for a duplicate id). It returns
	// the parent after the attach and the new link's listing entry.
	AttachRemote(ctx context.Context, req service.RemoteAttach) (meta.Topic, service.ChildStatus, error)
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
func validRemote(parent string, b *remoteBody, delay int64, start string) (service.RemoteAttach, error) {
	urls, err := meta.ParseRemoteURLs(b.URL)
	switch {
	case err != nil:
		return service.RemoteAttach{}, invalidf("remote.url: %v", err)
	case b.Topic == "" || !validTopicName(b.Topic):
		return service.RemoteAttach{}, invalidf("remote.topic: invalid topic name %q", b.Topic)
	case b.User != "" && !meta.ValidUsername(b.User):
		return service.RemoteAttach{}, invalidf("remote.user: invalid username")
	case len(b.Password) > 72 || (b.User != "" && b.Password == ""):
		return service.RemoteAttach{}, invalidf("remote.password: 1 … 72 bytes with a user")
	case delay < 0 || delay > meta.MaxDelayMs:
		return service.RemoteAttach{}, invalidf("delay_ms must be 0 … %d", meta.MaxDelayMs)
	case !meta.ValidStart(start):
		return service.RemoteAttach{}, invalidf("start must be attach, consumer_frontier or oldest")
	}
	return service.RemoteAttach{Parent: parent, URLs: urls, Topic: b.Topic, User: b.User, Password: b.Password,
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
