package partition

import (
	"errors"
	"time"

	"narad.dev/broker/internal/consume"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/metrics"
)

// logSource adapts a partition log to the consume engine's Source. taker and notify (both nil
// or both set) also tell peers' parked long-polls that the partition may have reservable
// messages again, unless a local long-poll takes them.
type logSource struct {
	l      *plog.Log
	taker  func() bool
	notify func(taken bool)
}

func (s logSource) HighWatermark() int64 { return s.l.HighWatermark() }
func (s logSource) OldestOffset() int64  { return s.l.OldestOffset() }
func (s logSource) Broadcast() {
	if s.notify == nil {
		s.l.Broadcast()
		return
	}
	taken := s.taker() // before the broadcast wakes local waiters
	s.l.Broadcast()
	s.notify(taken)
}

func (s logSource) Read(offset int64) (consume.Message, error) {
	r, err := s.l.Read(offset)
	switch {
	case err == nil:
		return consume.Message{Offset: r.Offset, Key: r.Key, CommittedAt: r.CommittedAt, Payload: r.Payload}, nil
	case errors.Is(err, plog.ErrCorruptRecord):
		return consume.Message{}, consume.ErrCorrupt
	case errors.Is(err, plog.ErrOffsetOutOfRange):
		return consume.Message{}, consume.ErrAgedOut
	default:
		return consume.Message{}, err
	}
}

// logObserver feeds a partition log's storage timings into the storage metrics.
type logObserver struct {
	m      *metrics.Metrics
	series *metrics.PartitionSeries
}

func (o *logObserver) ObserveFsync(d time.Duration) {
	o.series.Fsync().Observe(d.Seconds())
}

func (o *logObserver) ObserveFlush(d time.Duration, bytes int) {
	f := o.series.Flush()
	f.Time.Observe(d.Seconds())
	f.Bytes.Add(float64(bytes))
}

func (o *logObserver) ObserveHWMPersist(d time.Duration, err error) {
	if err == nil {
		o.series.HWMPersistOK().Observe(d.Seconds())
		return
	}
	l := o.series.Labels()
	o.m.StorageHWMPersist.WithLabelValues(l[0], l[1], "error").Observe(d.Seconds())
}

// shardObserver feeds consume-engine events into the queue-health metrics.
type shardObserver struct {
	m      *metrics.Metrics
	labels [2]string
}

func (o *shardObserver) CorruptSkipped() {
	o.m.CorruptSkipped.WithLabelValues(o.labels[0], o.labels[1]).Inc()
}
func (o *shardObserver) AckRejected(reason string) { o.m.AckRejected.WithLabelValues(reason).Inc() }
func (o *shardObserver) Extended()                 { o.m.AckExtended.WithLabelValues(o.labels[0]).Inc() }
func (o *shardObserver) Nacked()                   { o.m.Nacks.WithLabelValues(o.labels[0]).Inc() }
