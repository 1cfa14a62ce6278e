package api

import (
	"fmt"
	"net/http"
	"strconv"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// ack is POST /v1/topics/{topic}/ack (docs/internals/http-api.md §2.11); the body is ignored. Check order:
// consume grant (403) → query parameters and handle syntax (400) → topic existence (404) →
// handle partition range (400) → reservation match (410) → acked-ahead window (503).
func (s *server) ack(w http.ResponseWriter, r *http.Request) {
	const op = "ack"
	name := r.PathValue("topic")
	if !s.allows(s.caller(r), meta.ActionConsume, name) {
		s.writeErr(w, r, op, forbiddenf("no consume grant for topic %q", name))
		return
	}
	h, ackOp, err := parseAckQuery(queryParams(r))
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	t, ok := s.topic(r.Context(), name)
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(name))
		return
	}
	if h.Partition >= t.Partitions {
		s.writeErr(w, r, op, invalidf("receipt handle partition %d out of range [0, %d)", h.Partition, t.Partitions))
		return
	}
	errs := s.be.Ack(r.Context(), t, []service.AckEntry{ackEntry(h, ackOp)})
	if len(errs) != 1 {
		s.writeErr(w, r, op, fmt.Errorf("backend returned %d results for 1 ack", len(errs)))
		return
	}
	if errs[0] != nil {
		s.writeErr(w, r, op, errs[0])
		return
	}
	writeEmpty(w, http.StatusNoContent)
}

// ackBatchBody is the strict body of POST /v1/topics/{topic}/ack/batch (docs/internals/http-api.md §6.2).
type ackBatchBody struct {
	Acks []ackBatchEntry `json:"acks"`
}

// ackBatchEntry is one entry; Extend has the meaning of §2.11's extend parameter.
type ackBatchEntry struct {
	ReceiptHandle string  `json:"receipt_handle"`
	Extend        *string `json:"extend"`
}

// ackResult is one entry of the batch answer: status 204, 400, 410, 503 (or 500).
type ackResult struct {
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// parsedAck is a batch entry after syntax checks; Err (a 400) means it is not applied.
type parsedAck struct {
	Entry service.AckEntry
	Err   error
}

// decodeAckBatch decodes an ack batch body: the body itself must be strict JSON with
// 1…1000 entries (else the whole call is a 400); each entry's handle and extend are parsed
// independently, a bad one only failing that entry.
func decodeAckBatch(body []byte) ([]parsedAck, error) {
	b, ok := parseAckBatchFast(body)
	if !ok {
		if err := decodeStrict(body, &b); err != nil {
			return nil, err
		}
	}
	if len(b.Acks) == 0 || len(b.Acks) > maxAckBatch {
		return nil, invalidf("acks must hold 1…%d entries, got %d", maxAckBatch, len(b.Acks))
	}
	out := make([]parsedAck, len(b.Acks))
	for i, e := range b.Acks {
		out[i].Err = func() error {
			if e.ReceiptHandle == "" {
				return invalidf("receipt_handle is required")
			}
			h, err := consume.ParseHandle(e.ReceiptHandle)
			if err != nil {
				return invalidf("malformed receipt_handle %q", e.ReceiptHandle)
			}
			ext := ""
			if e.Extend != nil {
				ext = *e.Extend
			}
			op, err := parseExtend(ext)
			if err != nil {
				return err
			}
			out[i].Entry = ackEntry(h, op)
			return nil
		}()
	}
	return out, nil
}

// ackBatch is POST /v1/topics/{topic}/ack/batch (docs/internals/http-api.md §6.2): consume grant (403) → body
// (413/400) → topic existence (404) → per entry: syntax and partition range (400), then the
// Backend's verdict (410/503). Answers 200 with one result per entry, in request order.
func (s *server) ackBatch(w http.ResponseWriter, r *http.Request) {
	const op = "ack batch"
	name := r.PathValue("topic")
	if !s.allows(s.caller(r), meta.ActionConsume, name) {
		s.writeErr(w, r, op, forbiddenf("no consume grant for topic %q", name))
		return
	}
	body, err := readBody(r, maxJSONBody)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	parsed, err := decodeAckBatch(body)
	if err != nil {
		s.writeErr(w, r, op, err)
		return
	}
	t, ok := s.topic(r.Context(), name)
	if !ok {
		s.writeErr(w, r, op, s.topicMissing(name))
		return
	}
	results := make([]ackResult, len(parsed))
	var entries []service.AckEntry
	var slots []int // slots[k] = index in results of entries[k]
	for i, p := range parsed {
		err := p.Err
		if err == nil && p.Entry.Partition >= t.Partitions {
			err = invalidf("receipt handle partition %d out of range [0, %d)", p.Entry.Partition, t.Partitions)
		}
		if err != nil {
			results[i] = ackResult{Status: http.StatusBadRequest, Error: err.Error()}
			continue
		}
		entries = append(entries, p.Entry)
		slots = append(slots, i)
	}
	if len(entries) > 0 {
		errs := s.be.Ack(r.Context(), t, entries)
		if len(errs) != len(entries) {
			s.writeErr(w, r, op, fmt.Errorf("backend returned %d results for %d acks", len(errs), len(entries)))
			return
		}
		for k, e := range errs {
			results[slots[k]] = s.ackEntryResult(r, e)
		}
	}
	writeRawJSON(w, http.StatusOK, encodeAckResults(results))
}

// encodeAckResults encodes the batch ack answer {"results":[...]} followed by "\n", without
// reflection: most entries are {"status":204}.
func encodeAckResults(results []ackResult) []byte {
	dst := make([]byte, 0, 16+len(results)*len(`{"status":204},`))
	dst = append(dst, `{"results":[`...)
	for i := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"status":`...)
		dst = strconv.AppendInt(dst, int64(results[i].Status), 10)
		if results[i].Error != "" {
			dst = append(dst, `,"error":`...)
			dst = appendJSONString(dst, results[i].Error)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

// ackEntryResult maps one Backend ack verdict to its per-entry result.
func (s *server) ackEntryResult(r *http.Request, err error) ackResult {
	if err == nil {
		return ackResult{Status: http.StatusNoContent}
	}
	st := statusOf(err)
	if st == http.StatusInternalServerError {
		s.log.Error("ack failed", "method", logValue(r.Method), "path", logValue(r.URL.Path), "err", err)
		return ackResult{Status: st, Error: "ack failed"}
	}
	return ackResult{Status: st, Error: err.Error()}
}

// ackEntry builds the Backend entry for a parsed handle.
func ackEntry(h consume.Handle, op service.AckOp) service.AckEntry {
	return service.AckEntry{Partition: h.Partition, Offset: h.Offset, Nonce: h.Nonce, Op: op}
}
