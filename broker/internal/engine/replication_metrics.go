package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/transfer"
)

// The replication metrics (docs/internals/metrics.md §8): gauges of the partitions this node
// leads, refreshed by the poller; ISR changes and replication bytes counted as they happen.

// ledPartition is one partition this node owns (leads), as the local replica has it.
type ledPartition struct {
	topic meta.Topic
	a     meta.Assignment
}

// replicationSeries remembers the label sets the last pollReplication set, so the series of
// a partition this node no longer leads (or a follower no longer in its replica list) go.
type replicationSeries struct {
	mu   sync.Mutex
	led  []ledPartition // the owned partitions at version
	ver  uint64
	ok   bool
	tp   map[[2]string]bool
	lags map[[3]string]bool
}

// pollReplication sets narad_partition_replicas / _isr for every partition this node leads
// (R = 1 ones included: 1 and 1), narad_replica_lag_records for each follower of a
// replicated leadership it holds, and the two under-replicated totals (|ISR| < R, |ISR| < M);
// it deletes the series of partitions it no longer leads.
func (e *Engine) pollReplication() {
	s := &e.replSeries
	s.mu.Lock()
	defer s.mu.Unlock()
	tp, lags := map[[2]string]bool{}, map[[3]string]bool{}
	under, underMin := 0, 0
	for _, lp := range s.ownedLocked(e) {
		l := [2]string{lp.topic.Name, metrics.Partition(lp.a.Partition)}
		isr := len(lp.a.InSync())
		e.m.PartitionReplicas.WithLabelValues(l[0], l[1]).Set(float64(len(lp.a.ReplicaSet())))
		e.m.PartitionISR.WithLabelValues(l[0], l[1]).Set(float64(isr))
		tp[l] = true
		if isr < lp.topic.RF() {
			under++
		}
		if isr < lp.topic.MinISR() {
			underMin++
		}
		if ld, ok := e.host.Leader(lp.topic.Name, lp.a.Partition); ok && replicated(lp.topic) {
			for f, lag := range ld.Lag() {
				k := [3]string{l[0], l[1], f}
				e.m.ReplicaLag.WithLabelValues(k[0], k[1], k[2]).Set(float64(max(0, lag)))
				lags[k] = true
			}
		}
	}
	e.m.UnderReplicated.Set(float64(under))
	e.m.UnderMinISR.Set(float64(underMin))
	for k := range s.tp {
		if !tp[k] {
			e.m.PartitionReplicas.DeleteLabelValues(k[0], k[1])
			e.m.PartitionISR.DeleteLabelValues(k[0], k[1])
		}
	}
	for k := range s.lags {
		if !lags[k] {
			e.m.ReplicaLag.DeleteLabelValues(k[0], k[1], k[2])
		}
	}
	s.tp, s.lags = tp, lags
}

// ownedLocked lists the partitions the local replica names this node the owner of, read
// again only when the metadata version moved.
func (s *replicationSeries) ownedLocked(e *Engine) []ledPartition {
	ver := e.meta.MetadataVersion()
	if s.ok && s.ver == ver {
		return s.led
	}
	var out []ledPartition
	for _, t := range e.meta.Topics("", 0) {
		for _, a := range e.meta.Assignments(t.Name) {
			if a.Owner == e.cfg.NodeID {
				out = append(out, ledPartition{topic: t, a: a})
			}
		}
	}
	s.led, s.ver, s.ok = out, ver, true
	return out
}

// countISRChange counts one ISR change of a leadership of this node.
func (e *Engine) countISRChange(change string) {
	if slices.Contains([]string{metrics.ISRShrink, metrics.ISRExpand}, change) {
		e.m.ISRChanges.WithLabelValues(change).Inc()
	}
}

// MeteredHost is replica.Host counting the frame bytes of every fetch answer it serves.
type MeteredHost struct {
	*replica.Host
	out prometheus.Counter
}

// Fetch serves a follower's fetch (replica.Host.Fetch) and counts its frames.
func (h MeteredHost) Fetch(ctx context.Context, topic string, p int, incarnation string, req replica.FetchRequest, wait time.Duration) (replica.FetchReply, error) {
	rep, err := h.Host.Fetch(ctx, topic, p, incarnation, req, wait)
	h.out.Add(float64(len(rep.Frames)))
	return rep, err
}

// meteredSource is a follower's replica.Source counting the frame bytes it fetches.
type meteredSource struct {
	replica.Source
	in prometheus.Counter
}

// Fetch fetches from the leader (replica.Source.Fetch) and counts the frames received.
func (s meteredSource) Fetch(ctx context.Context, req replica.FetchRequest) (replica.FetchReply, error) {
	rep, err := s.Source.Fetch(ctx, req)
	s.in.Add(float64(len(rep.Frames)))
	return rep, err
}

// meteredSegments is a follower's replica.SegmentSource counting the segment bytes it
// receives, as meteredSource counts fetched frames.
type meteredSegments struct {
	replica.SegmentSource
	in prometheus.Counter
}

// Stream opens a segment stream (replica.SegmentSource.Stream) whose chunks are counted.
func (s meteredSegments) Stream(ctx context.Context, base, at, n int64, chunk int) (transfer.SegmentStream, error) {
	st, err := s.SegmentSource.Stream(ctx, base, at, n, chunk)
	if err != nil {
		return nil, err
	}
	return meteredStream{st, s.in}, nil
}

type meteredStream struct {
	transfer.SegmentStream
	in prometheus.Counter
}

func (s meteredStream) Recv(buf []byte) (int, error) {
	n, err := s.SegmentStream.Recv(buf)
	s.in.Add(float64(n))
	return n, err
}
