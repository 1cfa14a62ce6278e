package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionSeries holds one partition's hot-path series (every commit, flush, fsync and
// consume of it updates some), resolved once instead of by a label lookup per update. Each
// group is resolved at its own first use, so a series appears when its first event happens,
// as with WithLabelValues: a partition nobody consumed from exports no consumed series. A
// DeleteTopic moves the registry's generation; handles resolved before it
// are resolved again at their next use, so a series deleted under a live partition comes back
// as a fresh WithLabelValues would bring it back, and no update lands in a series no longer
// exported.
type PartitionSeries struct {
	m      *Metrics
	labels [2]string

	produced, consumed slot[Counted]
	flush              slot[Flushed]
	fsync, hwmOK       slot[prometheus.Observer]
}

// Counted are a partition's message and byte counters of one direction.
type Counted struct{ Messages, Bytes prometheus.Counter }

// Flushed are a partition's segment-write timing and byte counter.
type Flushed struct {
	Time  prometheus.Observer
	Bytes prometheus.Counter
}

// PartitionSeries returns the series cache of partition (topic, partition); labels as
// Partition formats them.
func (m *Metrics) PartitionSeries(topic, partition string) *PartitionSeries {
	return &PartitionSeries{m: m, labels: [2]string{topic, partition}}
}

// Labels are the series' (topic, partition) label values.
func (s *PartitionSeries) Labels() [2]string { return s.labels }

// Produced are narad_messages_produced_total and narad_bytes_produced_total.
func (s *PartitionSeries) Produced() Counted { return s.produced.get(s, mkProduced) }

// Consumed are narad_messages_consumed_total and narad_bytes_consumed_total.
func (s *PartitionSeries) Consumed() Counted { return s.consumed.get(s, mkConsumed) }

// Flush are narad_storage_flush_duration_seconds and narad_storage_flush_bytes_total.
func (s *PartitionSeries) Flush() Flushed { return s.flush.get(s, mkFlush) }

// Fsync is narad_storage_fsync_duration_seconds.
func (s *PartitionSeries) Fsync() prometheus.Observer { return s.fsync.get(s, mkFsync) }

// HWMPersistOK is narad_storage_high_watermark_persist_duration_seconds{outcome="ok"}.
func (s *PartitionSeries) HWMPersistOK() prometheus.Observer { return s.hwmOK.get(s, mkHWMOK) }

func mkProduced(m *Metrics, t, p string) Counted {
	return Counted{Messages: m.MessagesProduced.WithLabelValues(t, p), Bytes: m.BytesProduced.WithLabelValues(t, p)}
}

func mkConsumed(m *Metrics, t, p string) Counted {
	return Counted{Messages: m.MessagesConsumed.WithLabelValues(t, p), Bytes: m.BytesConsumed.WithLabelValues(t, p)}
}

func mkFlush(m *Metrics, t, p string) Flushed {
	return Flushed{Time: m.StorageFlushDuration.WithLabelValues(t, p), Bytes: m.StorageFlushBytes.WithLabelValues(t, p)}
}

func mkFsync(m *Metrics, t, p string) prometheus.Observer {
	return m.StorageFsyncDuration.WithLabelValues(t, p)
}

func mkHWMOK(m *Metrics, t, p string) prometheus.Observer {
	return m.StorageHWMPersist.WithLabelValues(t, p, "ok")
}

// slot is one group's handles with the generation they were resolved in.
type slot[T any] struct{ cur atomic.Pointer[resolved[T]] }

type resolved[T any] struct {
	gen uint64
	v   T
}

// get returns the slot's handles, resolving them with mk (a plain function, so the fast path
// allocates nothing) on first use and after a DeleteTopic.
func (sl *slot[T]) get(s *PartitionSeries, mk func(m *Metrics, topic, partition string) T) T {
	gen := s.m.gen.Load()
	if r := sl.cur.Load(); r != nil && r.gen == gen {
		return r.v
	}
	r := &resolved[T]{gen: gen, v: mk(s.m, s.labels[0], s.labels[1])}
	sl.cur.Store(r)
	return r.v
}
