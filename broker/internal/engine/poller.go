package engine

import (
	"context"
	"io/fs"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Poller cadences (spec/metrics.md conventions).
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
	for _, pt := range e.parts.snapshot() {
		st := pt.log.Stats()
		l := pt.labels
		topicBytes[l[0]] += st.SizeBytes
		e.m.PartitionSize.WithLabelValues(l[0], l[1]).Set(float64(st.SizeBytes))
		e.m.Segments.WithLabelValues(l[0], l[1]).Set(float64(st.Segments))
		pt.shardMu.Lock()
		s := pt.shard
		pt.shardMu.Unlock()
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
		if lag > 0 && !st.OldestSegmentAt.IsZero() {
			age = now.Sub(st.OldestSegmentAt).Seconds()
		}
		e.m.OldestUnconsumedAge.WithLabelValues(l[0], l[1]).Set(age)
	}
	for t, b := range topicBytes {
		e.m.TopicBytes.WithLabelValues(t).Set(float64(b))
	}
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
}
