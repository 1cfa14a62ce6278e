package api

import (
	"context"
	"fmt"
	"net/http"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// FanoutBackend is the fan-out part of the service layer (docs/internals/http-api.md §2.12–§2.14).
type FanoutBackend interface {
	// AttachChild links child under parent (attach point, fresh epoch) and returns the parent
	// after the attach. State errors: ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable.
	AttachChild(ctx context.Context, parent, child string, delayMs int64) (meta.Topic, error)
	// DetachChild dissolves the link; ErrNotFound when child is not attached to parent.
	DetachChild(ctx context.Context, parent, child string) error
	// Children lists parent's children in attach order with their cursor positions.
	Children(ctx context.Context, parent meta.Topic) []service.ChildStatus
}

// fanout returns the Backend's fan-out half, or answers 503 when the Backend has none.
func (s *server) fanout(w http.ResponseWriter, r *http.Request, op string) (FanoutBackend, bool) {
	fb, ok := s.be.(FanoutBackend)
	if !ok {
		s.writeErr(w, r, op, fmt.Errorf("%w: fan-out is not available on this node", ErrUnavailable))
	}
	return fb, ok
}

type attachBody struct {
	Child   string      `json:"child"`
	DelayMs *int64      `json:"delay_ms"`
	Remote  *remoteBody `json:"remote"` // remote child (docs/internals/fanout.md §13); exclusive with child
	Start   string      `json:"start"`  // remote only: attach | consumer_frontier | oldest
}

// attachChild is POST /v1/topics/{parent}/children (docs/internals/http-api.md §2.12). Check order: body (400) →
// parent existence and manage right (404/403) → child existence and manage right → Backend.
func (s *server) attachChild(w http.ResponseWriter, r *http.Request) {
	const op = "attach child"
	fb, ok := s.fanout(w, r, op)
	if !ok {
		return
	}
	var b attachBody
	if err := readJSON(r, &b); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if b.Remote != nil {
		s.attachRemote(w, r, b)
		return
	}
	parentName := r.PathValue("topic")
	var delay int64
	if b.DelayMs != nil {
		delay = *b.DelayMs
	}
	switch {
	case b.Start != "":
		s.writeErr(w, r, op, invalidf("start applies to remote children only"))
		return
	case b.Child == "":
		s.writeErr(w, r, op, invalidf("child is required"))
		return
	case !validTopicName(b.Child):
		s.writeErr(w, r, op, invalidf("invalid child topic name %q", b.Child))
		return
	case b.Child == parentName:
		s.writeErr(w, r, op, invalidf("a topic cannot be its own child"))
		return
	case delay < 0 || delay > meta.MaxDelayMs:
		s.writeErr(w, r, op, invalidf("delay_ms must be 0 … %d", meta.MaxDelayMs))
		return
	}
	u := s.caller(r)
	parent, ok := s.topic(r.Context(), parentName)
	if ok && !s.canManage(u, parent) {
		s.writeErr(w, r, op, forbiddenf("no manage right on topic %q", parentName))
		return
	}
	child, cok := s.topic(r.Context(), b.Child)
	if cok && !s.canManage(u, child) {
		s.writeErr(w, r, op, forbiddenf("no manage right on topic %q", b.Child))
		return
	}
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(parentName))
		return
	}
	if !cok {
		s.writeErr(w, r, op, s.topicMissing(b.Child))
		return
	}
	t, err := fb.AttachChild(r.Context(), parentName, b.Child, delay)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	writeJSON(w, http.StatusOK, TopicObjectOf(t))
}

// listChildren is GET /v1/topics/{parent}/children (docs/internals/http-api.md §2.13).
func (s *server) listChildren(w http.ResponseWriter, r *http.Request) {
	const op = "list children"
	fb, ok := s.fanout(w, r, op)
	if !ok {
		return
	}
	name := r.PathValue("topic")
	t, ok := s.topic(r.Context(), name)
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(name))
		return
	}
	children := fb.Children(r.Context(), t)
	if children == nil {
		children = []service.ChildStatus{}
	}
	writeJSON(w, http.StatusOK, struct {
		Parent   string                `json:"parent"`
		Children []service.ChildStatus `json:"children"`
	}{t.Name, children})
}

// detachChild is DELETE /v1/topics/{parent}/children/{child} (docs/internals/http-api.md §2.14): manage right on
// the parent or on the child.
func (s *server) detachChild(w http.ResponseWriter, r *http.Request) {
	const op = "detach child"
	fb, ok := s.fanout(w, r, op)
	if !ok {
		return
	}
	parentName, childName := r.PathValue("topic"), r.PathValue("child")
	if isRemoteRef(childName) {
		s.detachRemote(w, r, parentName, childName)
		return
	}
	u := s.caller(r)
	parent, pok := s.topic(r.Context(), parentName)
	child, cok := s.topic(r.Context(), childName)
	// A manage-right check on a missing topic passes (docs/internals/http-api.md §1.3), and either right suffices.
	if allowed := !pok || s.canManage(u, parent) || !cok || s.canManage(u, child); !allowed {
		s.writeErr(w, r, op, forbiddenf("no manage right on %q or %q", parentName, childName))
		return
	}
	switch {
	case !pok:
		s.writeErr(w, r, op, s.topicMissing(parentName))
		return
	case !cok:
		s.writeErr(w, r, op, s.topicMissing(childName))
		return
	case child.Parent != parentName:
		s.writeErr(w, r, op, notFoundf("topic %q is not attached to %q", childName, parentName))
		return
	}
	if err := fb.DetachChild(r.Context(), parentName, childName); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}
