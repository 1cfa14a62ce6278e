package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionSeries holds one partition's hot-path series (every commit, flush, fsync and
// consume of it updates some), resolved once instead of by a label lookup per update. A
// DeleteTopic moves the registry's generation; handles resolved before it are resolved again
// at their next use, so a series deleted under a live partition comes back as a fresh
// WithLabelValues would bring it back, and no update lands in a series no longer exported.
type PartitionSeries struct {
	m      *Metrics
	labels [2]string
	cur    atomic.Pointer[PartitionHandles]
}

// PartitionHandles are the resolved series of one partition (topic, partition).
type PartitionHandles struct {
	gen uint64

	MessagesProduced, BytesProduced prometheus.Counter
	MessagesConsumed, BytesConsumed prometheus.Counter
	FlushDuration, FsyncDuration    prometheus.Observer
	FlushBytes                      prometheus.Counter
	HWMPersistOK                    prometheus.Observer // narad_storage_hwm_persist_seconds{outcome="ok"}
}

// PartitionSeries returns the series cache of partition (topic, partition); labels as
// Partition formats them.
func (m *Metrics) PartitionSeries(topic, partition string) *PartitionSeries {
	return &PartitionSeries{m: m, labels: [2]string{topic, partition}}
}

// Labels are the series' (topic, partition) label values.
func (s *PartitionSeries) Labels() [2]string { return s.labels }

// Handles returns the partition's series, resolving them on first use and after a
// DeleteTopic.
func (s *PartitionSeries) Handles() *PartitionHandles {
	gen := s.m.gen.Load()
	if h := s.cur.Load(); h != nil && h.gen == gen {
		return h
	}
	t, p := s.labels[0], s.labels[1]
	h := &PartitionHandles{gen: gen,
		MessagesProduced: s.m.MessagesProduced.WithLabelValues(t, p),
		BytesProduced:    s.m.BytesProduced.WithLabelValues(t, p),
		MessagesConsumed: s.m.MessagesConsumed.WithLabelValues(t, p),
		BytesConsumed:    s.m.BytesConsumed.WithLabelValues(t, p),
		FlushDuration:    s.m.StorageFlushDuration.WithLabelValues(t, p),
		FsyncDuration:    s.m.StorageFsyncDuration.WithLabelValues(t, p),
		FlushBytes:       s.m.StorageFlushBytes.WithLabelValues(t, p),
		HWMPersistOK:     s.m.StorageHWMPersist.WithLabelValues(t, p, "ok"),
	}
	s.cur.Store(h)
	return h
}
