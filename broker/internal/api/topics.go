package api

import (
	"net/http"
	"sort"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/schema"
)

// createTopic is POST /v1/topics (spec §2.2). Check order: body size/JSON (413/400) →
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

// listTopics is GET /v1/topics (spec §2.3): keyset pagination in byte order of name.
func (s *server) listTopics(w http.ResponseWriter, r *http.Request) {
	const op = "list topics"
	limit, after, err := parseListQuery(r.URL.Query())
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

// describeTopic is GET /v1/topics/{topic} (spec §2.4): query syntax (400) → existence
// (404) → partition range (400).
func (s *server) describeTopic(w http.ResponseWriter, r *http.Request) {
	const op = "describe topic"
	p, given, err := parseDescribeQuery(r.URL.Query())
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
		stats = []PartitionStats{}
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].Index < stats[j].Index })
	writeJSON(w, http.StatusOK, describeObject{TopicObject: TopicObjectOf(t), Incarnation: t.Incarnation, PartitionStats: stats})
}

// alterTopic is PATCH /v1/topics/{topic} (spec §2.5). Check order: JSON syntax and field
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

// deleteTopic is DELETE /v1/topics/{topic} (spec §2.6): manage right (403) → existence
// (404) → delete.
func (s *server) deleteTopic(w http.ResponseWriter, r *http.Request) {
	const op = "delete topic"
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
	if err := s.be.DeleteTopic(r.Context(), name); err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	writeEmpty(w, http.StatusNoContent)
}
