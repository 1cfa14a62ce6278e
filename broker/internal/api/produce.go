package api

import (
	"context"
	"errors"
	"net/http"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// produce is POST /v1/topics/{topic}/produce (docs/internals/http-api.md §2.7). Check order: produce grant (403)
// → query parameters (400) → body size (413) / empty body (400) → topic existence (404) →
// delay child (409) → schema (400) → partition range (400) → durable accept (202).
func (s *server) produce(w http.ResponseWriter, r *http.Request) {
	const op = "produce"
	name := r.PathValue("topic")
	if !s.allows(s.caller(r), meta.ActionProduce, name) {
		s.writeErr(w, r, op, forbiddenf("no produce grant for topic %q", name))
		return
	}
	pq, err := parseProduceQuery(queryParams(r))
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	body, release, err := s.readBudgetedBody(r, maxPayloadBytes)
	defer release()
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	if len(body) == 0 {
		s.writeErr(w, r, op, invalidf("empty message body"))
		return
	}
	t, err := s.produceTarget(r.Context(), name)
	if err != nil {
		s.produceFailed(w, r, op, name, err)
		return
	}
	if err := s.be.ValidatePayload(t, body); err != nil {
		s.produceFailed(w, r, op, name, err)
		return
	}
	if pq.Partition >= t.Partitions {
		s.writeErr(w, r, op, invalidf("partition %d out of range [0, %d)", pq.Partition, t.Partitions))
		return
	}
	rec := service.ProduceRecord{Key: pq.Key, Partition: pq.Partition, Payload: body}
	if err := s.be.Produce(r.Context(), t, []service.ProduceRecord{rec}); err != nil {
		s.produceFailed(w, r, op, name, err)
		return
	}
	writeEmpty(w, http.StatusAccepted)
}

// produceBatch is POST /v1/topics/{topic}/produce/batch (docs/internals/http-api.md §2.8), all-or-nothing. The
// order follows §2.7: produce grant (403) → body size (413) → memory budget (503, Retry-After)
// → per-record syntax and payload size (400/413, first failing record) → topic existence
// (404) → delay child (409) → per record in array order: schema (400), partition range (400)
// → one durable accept.
func (s *server) produceBatch(w http.ResponseWriter, r *http.Request) {
	const op = "produce batch"
	name := r.PathValue("topic")
	if !s.allows(s.caller(r), meta.ActionProduce, name) {
		s.writeErr(w, r, op, forbiddenf("no produce grant for topic %q", name))
		return
	}
	body, release, err := s.readBudgetedBody(r, maxBatchBody)
	defer release()
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	recs, err := decodeBatch(body)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	t, err := s.produceTarget(r.Context(), name)
	if err != nil {
		s.produceFailed(w, r, op, name, err)
		return
	}
	for i, rec := range recs {
		if err := s.be.ValidatePayload(t, rec.Payload); err != nil {
			s.produceFailed(w, r, op, name, &recordError{Index: i, Err: err})
			return
		}
		if rec.Partition >= t.Partitions {
			s.writeErr(w, r, op, &recordError{Index: i,
				Err: invalidf("partition %d out of range [0, %d)", rec.Partition, t.Partitions)})
			return
		}
	}
	if err := s.be.Produce(r.Context(), t, recs); err != nil {
		s.produceFailed(w, r, op, name, err)
		return
	}
	writeJSON(w, http.StatusAccepted, struct {
		Accepted int `json:"accepted"`
	}{len(recs)})
}

// produceTarget looks up the topic and refuses delay children: their only source is the
// parent (docs/internals/http-api.md §2.7); non-delay children accept direct produce.
func (s *server) produceTarget(ctx context.Context, name string) (meta.Topic, error) {
	t, ok := s.topic(ctx, name)
	if !ok {
		return meta.Topic{}, s.topicMissing(name)
	}
	if t.Parent != "" && t.FanoutDelayMs > 0 {
		return meta.Topic{}, &reqError{sentinel: ErrDelayedChild,
			msg: "topic " + name + " is a delay child of " + t.Parent + "; produce to the parent"}
	}
	return t, nil
}

// produceFailed counts the rejections the HTTP layer decides (docs/internals/metrics.md §2:
// "schema", "delayed_child") and answers err. "draining" is decided, and counted, by the
// Backend's Produce.
func (s *server) produceFailed(w http.ResponseWriter, r *http.Request, op, topic string, err error) {
	switch {
	case errors.Is(err, ErrSchema):
		s.events.ProduceRejected(topic, "schema")
	case errors.Is(err, ErrDelayedChild):
		s.events.ProduceRejected(topic, "delayed_child")
	}
	s.writeErr(w, r, op, err)
}
