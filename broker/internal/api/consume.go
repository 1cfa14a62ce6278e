package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// consume is GET /v1/topics/{topic}/consume (docs/internals/http-api.md §2.9, §6.1). Check order: consume grant
// (403) → query syntax (400) → topic existence (404) → partition range / offset without
// partition (400) → read (200 / 204 / 410 / 503).
//
// Response shape: one Message object when max_messages is absent or 1 (§6.1: "With N = 1
// or absent the response is exactly §2.9"); {"messages":[...]} when max_messages ≥ 2.
func (s *server) consume(w http.ResponseWriter, r *http.Request) {
	const op = "consume"
	name := r.PathValue("topic")
	if !s.allows(s.caller(r), meta.ActionConsume, name) {
		s.writeErr(w, r, op, forbiddenf("no consume grant for topic %q", name))
		return
	}
	cq, err := parseConsumeQuery(queryParams(r), s.maxWait)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	t, ok := s.topic(r.Context(), name)
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(name))
		return
	}
	if cq.Offset >= 0 && !cq.PartitionGiven {
		s.writeErr(w, r, op, invalidf("offset requires partition"))
		return
	}
	req := service.ConsumeRequest{Partition: -1, Offset: cq.Offset, Wait: cq.Wait, Max: cq.Max}
	if cq.PartitionGiven {
		if cq.Partition < 0 || cq.Partition >= t.Partitions {
			s.writeErr(w, r, op, invalidf("partition %d out of range [0, %d)", cq.Partition, t.Partitions))
			return
		}
		req.Partition = cq.Partition
	}
	replay := req.Offset >= 0
	if replay {
		req.Wait = 0 // wait is ignored on replay
	}
	start := time.Now()
	msgs, err := s.be.Consume(r.Context(), t, req)
	if !replay && req.Wait > 0 {
		s.events.ConsumeWait(name, waitOutcome(r.Context(), len(msgs), err), time.Since(start))
	}
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	defer s.be.ReleaseAnswer(msgs) // all of them: the answer below may be cut to req.Max
	if len(msgs) == 0 {
		s.events.ConsumeEmpty(name)
		writeEmpty(w, http.StatusNoContent)
		return
	}
	if len(msgs) > req.Max {
		msgs = msgs[:req.Max]
	}
	if r.Context().Err() != nil {
		// The consumer is gone: nothing can be written, and the leases would hold the
		// messages back until they expired.
		s.be.Requeue(t, msgs)
		return
	}
	buf := answerBufs.Get().(*[]byte)
	*buf = encodeMessages(*buf, msgs, cq.Multi)
	if err := writeRawJSON(w, http.StatusOK, *buf); err != nil {
		// A failed write of an answer too large for net/http to hold whole: the consumer has
		// no whole answer to act on. (A smaller one is sent after this returns, unseen here.)
		s.be.Requeue(t, msgs)
	}
	if cap(*buf) <= maxPooledAnswer { // the writer has copied it: net/http buffers or sends it
		answerBufs.Put(buf)
	}
}

// answerBufs holds consume answer buffers between requests (*[]byte).
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer bounds the buffers answerBufs keeps (bytes): larger batch answers are
// left to the collector rather than pinned.
const maxPooledAnswer = 256 << 10

// waitOutcome labels a long-poll for narad_consume_wait_seconds: hit, timeout or
// cancelled (the client went away).
func waitOutcome(ctx context.Context, n int, err error) string {
	switch {
	case n > 0:
		return "hit"
	case ctx.Err() != nil, errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "timeout"
}
