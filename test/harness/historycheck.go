package harness

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"
)

// Report is the verdict of Check. Missing, Phantom, Resurrected and Conflicts are contract
// violations; duplicates are allowed by at-least-once delivery and only counted.
type Report struct {
	Attempts   int // produce calls
	IDs        int // distinct payloads attempted
	Accepted   int // distinct payloads with a 202
	Rejected   int // distinct payloads only ever refused with a 4xx
	Unknown    int // distinct payloads whose best outcome is ambiguous
	Deliveries int // deliveries recorded (queue and replay)
	Delivered  int // distinct payloads delivered at least once

	Missing     []string // 202-accepted, never delivered
	Phantom     []string // delivered, never produced
	Resurrected []string // refused with a 4xx on every attempt, yet delivered
	Conflicts   []string // one topic/partition/offset seen carrying two payloads

	ProduceErrors    map[string]int          // "<node> <ErrorKind>" → failed produce calls
	ProduceErrorSpan map[string][2]time.Time // same key → first and last such failure

	Duplicates       int            // queue deliveries beyond the first of each payload
	DuplicateIDs     map[string]int // payload → queue deliveries, for payloads delivered more than once
	DuplicateCopies  int            // extra log positions of payloads stored more than once
	UnknownDelivered int            // ambiguous produces that were delivered
}

// OK reports whether the history keeps the contract.
func (r Report) OK() bool {
	return len(r.Missing) == 0 && len(r.Phantom) == 0 && len(r.Resurrected) == 0 && len(r.Conflicts) == 0
}

// Err is nil when OK, else an error carrying the report text.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	return errors.New("history check failed: " + r.String())
}

// String renders the counts and at most 10 ids of each violation.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d produce calls over %d ids (%d accepted, %d rejected, %d unknown); %d deliveries of %d ids; "+
		"%d duplicate deliveries over %d ids, %d extra stored copies, %d ambiguous produces delivered; "+
		"%d missing, %d phantom, %d resurrected, %d offset conflicts",
		r.Attempts, r.IDs, r.Accepted, r.Rejected, r.Unknown, r.Deliveries, r.Delivered,
		r.Duplicates, len(r.DuplicateIDs), r.DuplicateCopies, r.UnknownDelivered,
		len(r.Missing), len(r.Phantom), len(r.Resurrected), len(r.Conflicts))
	if len(r.ProduceErrors) > 0 {
		kinds := make([]string, 0, len(r.ProduceErrors))
		for k := range r.ProduceErrors {
			kinds = append(kinds, k)
		}
		sort.Slice(kinds, func(i, j int) bool { return r.ProduceErrors[kinds[i]] > r.ProduceErrors[kinds[j]] })
		b.WriteString("\n  produce errors:")
		for _, k := range kinds[:min(8, len(kinds))] {
			span := r.ProduceErrorSpan[k]
			fmt.Fprintf(&b, " [%d× %s, %s–%s]", r.ProduceErrors[k], k,
				span[0].Format("15:04:05.000"), span[1].Format("15:04:05.000"))
		}
	}
	for _, l := range []struct {
		name string
		ids  []string
	}{{"missing", r.Missing}, {"phantom", r.Phantom}, {"resurrected", r.Resurrected}, {"conflicts", r.Conflicts}} {
		if len(l.ids) == 0 {
			continue
		}
		ids := l.ids
		if len(ids) > 10 {
			ids = ids[:10]
		}
		fmt.Fprintf(&b, "\n  %s (first %d): %s", l.name, len(ids), strings.Join(ids, " "))
	}
	return b.String()
}

type position struct {
	topic     string
	partition int
	offset    int64
}

// Check evaluates the whole history: every 202 delivered at least once (Missing), nothing
// delivered that was never produced (Phantom) or only ever refused (Resurrected), no log
// position carrying two payloads (Conflicts); duplicates counted.
func (h *History) Check() Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := Report{Attempts: h.attempts, IDs: len(h.produced), Deliveries: len(h.deliveries), DuplicateIDs: map[string]int{},
		ProduceErrors: maps.Clone(h.errKinds), ProduceErrorSpan: maps.Clone(h.errSpan)}
	queue := map[string]int{}
	delivered := map[string]bool{}
	at := map[position]string{}
	copies := map[string]map[position]bool{}
	conflicts := map[string]bool{}
	for _, d := range h.deliveries {
		delivered[d.ID] = true
		if !d.Replay {
			queue[d.ID]++
		}
		pos := position{d.Topic, d.Partition, d.Offset}
		if prev, ok := at[pos]; ok && prev != d.ID {
			conflicts[fmt.Sprintf("%s/%d@%d:%s|%s", d.Topic, d.Partition, d.Offset, prev, d.ID)] = true
		} else {
			at[pos] = d.ID
		}
		if copies[d.ID] == nil {
			copies[d.ID] = map[position]bool{}
		}
		copies[d.ID][pos] = true
	}
	for id, s := range h.produced {
		switch s.outcome {
		case OutcomeAccepted:
			r.Accepted++
			if !delivered[id] {
				r.Missing = append(r.Missing, id)
			}
		case OutcomeRejected:
			r.Rejected++
			if delivered[id] {
				r.Resurrected = append(r.Resurrected, id)
			}
		default:
			r.Unknown++
			if delivered[id] {
				r.UnknownDelivered++
			}
		}
	}
	for id := range delivered {
		r.Delivered++
		if h.produced[id] == nil {
			r.Phantom = append(r.Phantom, id)
		}
		if n := queue[id]; n > 1 {
			r.Duplicates += n - 1
			r.DuplicateIDs[id] = n
		}
		if n := len(copies[id]); n > 1 {
			r.DuplicateCopies += n - 1
		}
	}
	for c := range conflicts {
		r.Conflicts = append(r.Conflicts, c)
	}
	sort.Strings(r.Missing)
	sort.Strings(r.Phantom)
	sort.Strings(r.Resurrected)
	sort.Strings(r.Conflicts)
	return r
}

// AcceptedBetween returns the sorted ids of topic whose first 202 arrived in [from, to).
func (h *History) AcceptedBetween(topic string, from, to time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id, s := range h.produced {
		if s.outcome == OutcomeAccepted && s.topic == topic && !s.at.Before(from) && s.at.Before(to) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Latencies returns, for each of ids that was accepted and delivered, the time from its first
// 202 to its first delivery, and the ids not delivered yet.
func (h *History) Latencies(ids []string) (lat map[string]time.Duration, undelivered []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	firstAt := make(map[string]time.Time, len(ids))
	for _, d := range h.deliveries {
		if t, ok := firstAt[d.ID]; !ok || d.At.Before(t) {
			firstAt[d.ID] = d.At
		}
	}
	lat = make(map[string]time.Duration, len(ids))
	for _, id := range ids {
		s := h.produced[id]
		if s == nil || s.outcome != OutcomeAccepted {
			continue
		}
		t, ok := firstAt[id]
		if !ok {
			undelivered = append(undelivered, id)
			continue
		}
		lat[id] = t.Sub(s.at)
	}
	sort.Strings(undelivered)
	return lat, undelivered
}

// Quantile returns the q-quantile (0…1) of ds by nearest rank, 0 for none.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
