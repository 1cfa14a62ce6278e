package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/schema"
	"narad.dev/broker/internal/service"
)

// createTopic is POST /v1/topics (docs/internals/http-api.md §2.2). Check order: body size/JSON (413/400) →
// create grant on name (403) → manage right on parent (403) → field validation (400) →
// parent existence (404) → conflicts (409, Backend) → attach point (503, Backend).
func (s *server) createTopic(w http.ResponseWriter, r *http.Request) {
	const op = "create topic"
	var b createTopicBody
	if err := readJSON(r, &b); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	u := s.caller(r)
	if !s.allows(u, meta.ActionCreate, b.Name) {
		s.writeErr(w, r, op, forbiddenf("no create grant for topic %q", b.Name))
		return
	}
	var parentFound bool
	if b.Parent != "" {
		var parent meta.Topic
		parent, parentFound = s.be.Topic(b.Parent)
		// A manage check on a missing topic passes; the 404 comes after validation (§1.3).
		if parentFound && !s.canManage(u, parent) {
			s.writeErr(w, r, op, forbiddenf("no manage right on parent topic %q", b.Parent))
			return
		}
	}
	req, err := validateCreate(&b, s.maxParts)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if b.Parent != "" && !parentFound {
		s.writeErr(w, r, op, notFoundf("parent topic %q not found", b.Parent))
		return
	}
	if s.security {
		req.Owner = u.Username // the body's owner is ignored; no owner when security is off
	}
	t, err := s.be.CreateTopic(r.Context(), req)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	writeJSON(w, http.StatusCreated, TopicObjectOf(t))
}

// listTopics is GET /v1/topics (docs/internals/http-api.md §2.3): keyset pagination in byte order of name.
func (s *server) listTopics(w http.ResponseWriter, r *http.Request) {
	const op = "list topics"
	limit, after, err := parseListQuery(queryParams(r))
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	ts, next := s.be.ListTopics(after, limit)
	out := topicList{Topics: make([]TopicObject, 0, len(ts)), NextPageToken: next}
	for _, t := range ts {
		out.Topics = append(out.Topics, TopicObjectOf(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// describeTopic is GET /v1/topics/{topic} (docs/internals/http-api.md §2.4): query syntax (400) → existence
// (404) → partition range (400).
func (s *server) describeTopic(w http.ResponseWriter, r *http.Request) {
	const op = "describe topic"
	p, given, err := parseDescribeQuery(queryParams(r))
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	name := r.PathValue("topic")
	t, ok := s.topic(r.Context(), name)
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(name))
		return
	}
	if given && (p < 0 || p >= t.Partitions) {
		s.writeErr(w, r, op, invalidf("partition %d out of range [0, %d)", p, t.Partitions))
		return
	}
	stats := s.be.PartitionStats(r.Context(), t, p)
	if stats == nil {
		stats = []service.PartitionStats{}
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Index < stats[j].Index })
	writeJSON(w, http.StatusOK, describeObject{TopicObject: TopicObjectOf(t), Incarnation: t.Incarnation, PartitionStats: stats})
}

// alterTopic is PATCH /v1/topics/{topic} (docs/internals/http-api.md §2.5). Check order: JSON syntax and field
// validation (400/413) → manage right (403) → existence (404) → partition bounds against
// the current count and schema compatibility (400) → conflicts (409).
func (s *server) alterTopic(w http.ResponseWriter, r *http.Request) {
	const op = "alter topic"
	var b alterTopicBody
	if err := readJSON(r, &b); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	req, err := validateAlter(&b, s.maxParts)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	name := r.PathValue("topic")
	t, ok := s.be.Topic(name)
	if ok && !s.canManage(s.caller(r), t) {
		s.writeErr(w, r, op, forbiddenf("no manage right on topic %q", name))
		return
	}
	if !ok {
		s.writeErr(w, r, op, notFoundf("topic %q not found", name))
		return
	}
	if req.Partitions != 0 && req.Partitions <= t.Partitions {
		s.writeErr(w, r, op, invalidf("partitions can only grow: %d is not greater than the current %d", req.Partitions, t.Partitions))
		return
	}
	if err := checkAlterReplication(t, req); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if req.Schema != nil {
		if sr, ok := s.be.(SchemaReader); ok {
			if old, has := sr.Schema(name); has {
				if err := schema.CheckCompatible(old, req.Schema); err != nil {
					s.writeErr(w, r, op, invalidf("schema is not backward compatible: %v", err))
					return
				}
			}
		}
		if t.Parent != "" {
			s.writeErr(w, r, op, conflictf("topic %q is attached to %q; its schema is managed by the parent", name, t.Parent))
			return
		}
	}
	nt, err := s.be.AlterTopic(r.Context(), name, req)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	writeJSON(w, http.StatusOK, TopicObjectOf(nt))
}

// deleteTopic is DELETE /v1/topics/{topic}[?detach_children=true] (docs/internals/http-api.md §2.6): query (400)
// → manage right (403) → existence (404) → children without detach_children=true (409,
// naming them) → delete. A topic without children answers 204. Deleting a parent detaches
// its local children (they become standalone, keeping their data) and drops its remote
// links; what each child had not yet received from the parent is lost with the parent's
// log. That answer is 200 with the detached children and the messages they had not yet
// received (docs/fanout.md, Deleting a parent).
func (s *server) deleteTopic(w http.ResponseWriter, r *http.Request) {
	const op = "delete topic"
	detach, err := flagQuery(queryParams(r), "detach_children")
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	name := r.PathValue("topic")
	t, ok := s.be.Topic(name)
	if ok && !s.canManage(s.caller(r), t) {
		s.writeErr(w, r, op, forbiddenf("no manage right on topic %q", name))
		return
	}
	if !ok {
		s.writeErr(w, r, op, notFoundf("topic %q not found", name))
		return
	}
	hasChildren := len(t.Children) > 0 || len(t.RemoteLinks) > 0
	if hasChildren && !detach {
		s.writeErr(w, r, op, &childrenError{topic: name, children: childNames(t)})
		return
	}
	var detached []detachedChild
	if hasChildren {
		detached = s.detachedChildren(r.Context(), t)
	}
	if err := s.be.DeleteTopic(r.Context(), name); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if !hasChildren {
		writeEmpty(w, http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, topicDeletion{Deleted: name, DetachedChildren: detached})
}

// topicDeletion is the 200 answer of deleting a parent.
type topicDeletion struct {
	Deleted          string          `json:"deleted"`
	DetachedChildren []detachedChild `json:"detached_children"`
}

// detachedChild is one child a parent's delete detached (local) or dropped (remote link).
// UndeliveredMessages is what the child had not yet received from the parent when the
// delete was decided (for a delay child: its pending delayed messages); they are gone with
// the parent. UndeliveredComplete is false when some parent partition did not report.
type detachedChild struct {
	Name                string `json:"name"`
	Link                string `json:"link"` // local | remote
	DelayMs             int64  `json:"delay_ms"`
	UndeliveredMessages int64  `json:"undelivered_messages"`
	UndeliveredComplete bool   `json:"undelivered_complete"`
}

// detachedChildren reports t's children and their lag just before the delete.
func (s *server) detachedChildren(ctx context.Context, t meta.Topic) []detachedChild {
	out := []detachedChild{}
	fb, ok := s.be.(FanoutBackend)
	if !ok {
		for _, n := range childNames(t) {
			out = append(out, detachedChild{Name: n})
		}
		return out
	}
	for _, c := range fb.Children(ctx, t) {
		name := c.Name
		if c.ID != "" {
			name = c.ID
		}
		out = append(out, detachedChild{Name: name, Link: c.Link, DelayMs: c.DelayMs,
			UndeliveredMessages: c.LagMessages, UndeliveredComplete: c.LagComplete})
	}
	return out
}

// childNames lists t's local children and remote link IDs.
func childNames(t meta.Topic) []string {
	names := append([]string{}, t.Children...)
	for _, rl := range t.RemoteLinks {
		names = append(names, rl.ID)
	}
	return names
}

// childrenError is the 409 of deleting a parent without detach_children=true.
type childrenError struct {
	topic    string
	children []string
}

func (e *childrenError) Error() string {
	return fmt.Sprintf("topic %q has children %s: deleting it detaches them and loses what they have not yet received; repeat with detach_children=true to do so",
		e.topic, strings.Join(e.children, ", "))
}
func (e *childrenError) Unwrap() error               { return ErrConflict }
func (e *childrenError) ErrorFields() map[string]any { return map[string]any{"children": e.children} }
