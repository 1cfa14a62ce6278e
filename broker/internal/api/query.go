package api

import (
	"strconv"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/service"
)

// Query limits (docs/internals/http-api.md §1.7, §2.3, §6.1).
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	maxConsumeMax    = 1000
)

// singleParam returns the value of key and whether it was given; giving it twice is a 400.
func singleParam(q params, key string) (string, bool, error) {
	v, n := q.lookup(key)
	if n == 0 {
		return "", false, nil
	}
	if n > 1 {
		return "", false, invalidf("query parameter %q given more than once", key)
	}
	return v, true, nil
}

// parseNonNegInt parses a base-10 integer ≥ 0 that fits an int32 (partitions, counts).
func parseNonNegInt(key, s string) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, invalidf("query parameter %q: %q is not an integer", key, s)
	}
	if n < 0 {
		return 0, invalidf("query parameter %q must not be negative", key)
	}
	return int(n), nil
}

// produceQuery is the parsed query of POST .../produce.
type produceQuery struct {
	Key       string
	Partition int // -1 = not pinned
}

// parseProduceQuery applies docs/internals/http-api.md §2.7: key optional (empty = keyless; UTF-8, at most
// maxKeyBytes, else 400); partition, when
// given, a non-negative base-10 integer. Either given twice → 400. The range against the
// topic is checked later, in check order.
func parseProduceQuery(q params) (produceQuery, error) {
	pq := produceQuery{Partition: -1}
	key, _, err := singleParam(q, "key")
	if err != nil {
		return pq, err
	}
	if err := checkKey(key); err != nil {
		return pq, err
	}
	pq.Key = key
	ps, given, err := singleParam(q, "partition")
	if err != nil {
		return pq, err
	}
	if given {
		p, err := parseNonNegInt("partition", ps)
		if err != nil {
			return pq, err
		}
		pq.Partition = p
	}
	return pq, nil
}

// consumeQuery is the parsed query of GET .../consume.
type consumeQuery struct {
	PartitionGiven bool
	Partition      int   // meaningful only when PartitionGiven; may be negative (range-checked later)
	Offset         int64 // -1 = not a replay; else ≥ 0
	Wait           time.Duration
	Max            int  // 1 … 1000
	Multi          bool // answer {"messages": [...]} (max_messages > 1)
}

// parseConsumeQuery applies the syntax rules of docs/internals/http-api.md §2.9, §6.1. Checks that need the
// topic (partition range, offset without partition) are left to the handler so that they
// run after the 404, in check order. Each parameter given twice → 400.
//
// The result always has 0 ≤ Wait ≤ maxWait, 1 ≤ Max ≤ 1000, Offset ≥ -1, and Multi only
// when Max > 1.
func parseConsumeQuery(q params, maxWait time.Duration) (consumeQuery, error) {
	cq := consumeQuery{Offset: -1, Max: 1}
	if ws, given, err := singleParam(q, "wait"); err != nil {
		return cq, err
	} else if given {
		w, err := parseWait(ws, maxWait)
		if err != nil {
			return cq, err
		}
		cq.Wait = w
	}
	if ps, given, err := singleParam(q, "partition"); err != nil {
		return cq, err
	} else if given {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil {
			return cq, invalidf("query parameter \"partition\": %q is not an integer", ps)
		}
		cq.PartitionGiven, cq.Partition = true, int(p)
	}
	if os, given, err := singleParam(q, "offset"); err != nil {
		return cq, err
	} else if given {
		o, err := strconv.ParseInt(os, 10, 64)
		if err != nil {
			return cq, invalidf("query parameter \"offset\": %q is not an integer", os)
		}
		if o < 0 {
			return cq, invalidf("query parameter \"offset\" must not be negative")
		}
		cq.Offset = o
	}
	if ms, given, err := singleParam(q, "max_messages"); err != nil {
		return cq, err
	} else if given {
		n, err := strconv.ParseInt(ms, 10, 32)
		if err != nil || n < 1 || n > maxConsumeMax {
			return cq, invalidf("query parameter \"max_messages\" must be an integer in 1…%d", maxConsumeMax)
		}
		cq.Max = int(n)
		// docs/internals/http-api.md §6.1: "With N = 1 or absent the response is exactly §2.9 (one Message object)".
		cq.Multi = n > 1
	}
	return cq, nil
}

// parseWait parses a long-poll budget: Go duration syntax, where a bare number is invalid
// except "0"; negative → 0; above maxWait → maxWait (docs/internals/http-api.md §1.4, §1.7).
func parseWait(s string, maxWait time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalidf("query parameter \"wait\": %q is not a duration (e.g. 500ms, 10s)", s)
	}
	if d < 0 {
		d = 0
	}
	if d > maxWait {
		d = maxWait
	}
	return d, nil
}

// parseListQuery applies docs/internals/http-api.md §2.3: limit default 100, < 1 or non-integer → 400, > 1000
// capped; page_token opaque.
func parseListQuery(q params) (limit int, after string, err error) {
	limit = defaultListLimit
	if ls, given, err := singleParam(q, "limit"); err != nil {
		return 0, "", err
	} else if given {
		n, err := strconv.ParseInt(ls, 10, 64)
		if err != nil || n < 1 {
			return 0, "", invalidf("query parameter \"limit\" must be an integer ≥ 1")
		}
		limit = int(min(n, maxListLimit))
	}
	after, _, err = singleParam(q, "page_token")
	if err != nil {
		return 0, "", err
	}
	return limit, after, nil
}

// parseDescribeQuery parses the optional partition of GET /v1/topics/{topic} (-1 = all).
// A negative value passes here and fails the range check after the 404 (docs/internals/http-api.md §2.4).
func parseDescribeQuery(q params) (partition int, given bool, err error) {
	ps, given, err := singleParam(q, "partition")
	if err != nil || !given {
		return -1, false, err
	}
	p, perr := strconv.ParseInt(ps, 10, 32)
	if perr != nil {
		return -1, false, invalidf("query parameter \"partition\": %q is not an integer", ps)
	}
	return int(p), true, nil
}

// parseExtend maps an extend value to an operation (docs/internals/http-api.md §2.11): "" or "false" → ack,
// "true" or "1" → extend, "0" → nack, anything else → 400.
func parseExtend(s string) (service.AckOp, error) {
	switch s {
	case "", "false":
		return service.OpAck, nil
	case "true", "1":
		return service.OpExtend, nil
	case "0":
		return service.OpNack, nil
	}
	return 0, invalidf("extend must be absent, \"false\", \"true\", \"1\" or \"0\", not %q", s)
}

// parseAckQuery applies docs/internals/http-api.md §2.11: receipt_handle required and well-formed, extend valid;
// for both, a repeated parameter's first value wins.
func parseAckQuery(q params) (consume.Handle, service.AckOp, error) {
	hs := q.get("receipt_handle")
	if hs == "" {
		return consume.Handle{}, 0, invalidf("query parameter \"receipt_handle\" is required")
	}
	h, err := consume.ParseHandle(hs)
	if err != nil {
		return consume.Handle{}, 0, invalidf("malformed receipt_handle %q", hs)
	}
	op, err := parseExtend(q.get("extend"))
	if err != nil {
		return consume.Handle{}, 0, err
	}
	return h, op, nil
}

// flagQuery parses an optional boolean query parameter: absent or "false" → false, "true" →
// true; any other value, or the parameter given twice, → 400.
func flagQuery(q params, key string) (bool, error) {
	v, given, err := singleParam(q, key)
	switch {
	case err != nil:
		return false, err
	case !given || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	}
	return false, invalidf("query parameter %q must be true or false, not %q", key, v)
}
