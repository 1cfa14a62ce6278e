package engine

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"narad.dev/broker/internal/consume"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/partition"
)

// Poller cadences (docs/internals/metrics.md).
const (
	gaugePollInterval   = 5 * time.Second
	dataDirPollInterval = 30 * time.Second
)

// pollLoop refreshes the gauges from in-memory state every 5 s (never opening a log) and the
// data-dir sizes and quarantine gauges every 30 s (the first pass lists quarantined copies).
func (e *Engine) pollLoop(ctx context.Context) {
	t := time.NewTicker(gaugePollInterval)
	defer t.Stop()
	var lastDisk time.Time
	for {
		e.pollGauges()
		if time.Since(lastDisk) >= dataDirPollInterval {
			startup := lastDisk.IsZero()
			lastDisk = time.Now()
			e.pollDataDir()
			e.pollQuarantine(startup)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Engine) pollGauges() {
	topics := e.allTopics()
	e.m.TopicsTotal.Set(float64(len(topics)))
	parts := 0
	for _, t := range topics {
		parts += t.Partitions
	}
	e.m.PartitionsTotal.Set(float64(parts))
	if f := e.undispatched.Load(); f != nil {
		e.m.IngressUndispatched.Set(float64((*f)()))
	}
	topicBytes := map[string]int64{}
	now := e.now()
	for _, pt := range e.parts.Snapshot() {
		st := pt.Log().Stats()
		l := pt.Labels()
		topicBytes[l[0]] += st.SizeBytes
		e.m.PartitionSize.WithLabelValues(l[0], l[1]).Set(float64(st.SizeBytes))
		e.m.Segments.WithLabelValues(l[0], l[1]).Set(float64(st.Segments))
		s := e.pollShard(pt)
		if s == nil {
			continue
		}
		cs := s.State()
		lag := st.HighWatermark - (cs.Committed + 1)
		e.m.ConsumerLag.WithLabelValues(l[0], l[1]).Set(float64(max(0, lag)))
		e.m.ConsumerDropped.WithLabelValues(l[0], l[1]).Set(float64(max(0, st.OldestOffset-(cs.Committed+1))))
		e.m.InflightSize.WithLabelValues(l[0], l[1]).Set(float64(cs.InFlight))
		e.m.AckedAheadSize.WithLabelValues(l[0], l[1]).Set(float64(cs.AckedAhead))
		age := 0.0
		if lag > 0 {
			age = oldestUnconsumedAge(pt, cs.Committed+1, now, st.OldestSegmentAt)
		}
		e.m.OldestUnconsumedAge.WithLabelValues(l[0], l[1]).Set(age)
	}
	for t, b := range topicBytes {
		e.m.TopicBytes.WithLabelValues(t).Set(float64(b))
	}
	e.pollReplication()
}

// pollShard returns the consume shard of an open partition this node owns, opening it (it
// reads only the small consumer files) when no consume did yet: the queue-health gauges of a
// topic nobody consumes exist too, and show its lag. nil when not the owner or on error.
func (e *Engine) pollShard(pt *partition.Partition) *consume.Shard {
	s := pt.Shard()
	if s != nil {
		return s
	}
	t, ok := e.view.Topic(pt.Topic())
	if !ok || t.Incarnation != pt.Incarnation() || !e.owns(t.Name, pt.Index()) {
		return nil
	}
	s, err := e.parts.ShardOf(t, pt)
	if err != nil {
		return nil
	}
	return s
}

func (e *Engine) pollDataDir() {
	var size int64
	err := filepath.WalkDir(e.cfg.DataDir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // files vanish under retention and purges; count what is there
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		e.m.Errors.WithLabelValues("metrics", "data_dir_size").Inc()
	} else {
		e.m.DataDirSize.Set(float64(size))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(e.cfg.DataDir, &st); err != nil {
		e.m.Errors.WithLabelValues("metrics", "data_dir_available").Inc()
		return
	}
	e.m.DataDirAvailable.Set(float64(st.Bavail) * float64(st.Bsize))
	e.m.DataDirCapacity.Set(float64(st.Blocks) * float64(st.Bsize))
}

// headReadTries bounds how many records past the frontier the poller reads to find one it
// can decode (a corrupt record at the head is skipped by consumers anyway).
const headReadTries = 16

// oldestUnconsumedAge is narad_oldest_unconsumed_message_age_seconds of one partition whose
// oldest unconsumed offset is head (consumer frontier + 1, below the HWM): now minus the
// commit time of that record (docs/operating.md, Metrics). Commit times never decrease along
// a partition, so when head was removed by retention the oldest retained record is used, and
// when it is unreadable the next readable one (both lower bounds of the age). The log is read
// only when head moved since the last poll. Only if no record can be read (a transient
// error) does it fall back to the age of the oldest segment (an upper bound).
func oldestUnconsumedAge(pt *partition.Partition, head int64, now, oldestSegmentAt time.Time) float64 {
	at, ok := pt.Head().At(head, func(head int64) (int64, bool) { return headCommitTime(pt.Log(), head) })
	if !ok {
		if oldestSegmentAt.IsZero() {
			return 0
		}
		return max(0, now.Sub(oldestSegmentAt).Seconds())
	}
	return max(0, now.Sub(time.UnixMilli(at)).Seconds())
}

// headCommitTime reads the commit time of the first readable record at or after head.
func headCommitTime(l *plog.Log, head int64) (atMs int64, ok bool) {
	off := head
	for range headReadTries {
		r, err := l.Read(off)
		switch {
		case err == nil:
			return r.CommittedAt, true
		case errors.Is(err, plog.ErrOffsetOutOfRange):
			oldest := l.OldestOffset()
			if oldest <= off {
				return 0, false
			}
			off = oldest
		case errors.Is(err, plog.ErrCorruptRecord):
			off++
		default:
			return 0, false
		}
	}
	return 0, false
}
