package fanout

import (
	"log/slog"
	"net/http"
	"time"
)

// Fan-out constants (docs/internals/fanout.md §14). Config fields left zero take these.
const (
	// ReconcileInterval is the Runner's tick; an attach or detach is picked up on the next one.
	ReconcileInterval = 1 * time.Second
	// ForcedPassEvery bounds how long the skip rule may omit a full pass (reconcileForcedPassEvery).
	ForcedPassEvery = 30 * time.Second
	// SweepEveryTicks: the orphan sweep runs on every 30th caught-up tick, skipped ticks included.
	SweepEveryTicks = 30
	// MaxBatchRecords / MaxBatchBytes cap one slab (fanout.max_batch_records / _bytes).
	MaxBatchRecords = 4096
	MaxBatchBytes   = 4 << 20
	// Linger is how long a slab tops up after its first non-empty read.
	Linger = 25 * time.Millisecond
	// LongPoll is how long the first read of a slab parks on the parent's NotifyC.
	LongPoll = 1 * time.Second
	// RetryBackoff is the wait before held failed buckets are retried, and before a failed read
	// is retried.
	RetryBackoff = 1 * time.Second
	// MaxInFlight bounds concurrent child-partition commits of one slab.
	MaxInFlight = 16
	// CommitTimeout bounds one child-partition commit (local or RPC).
	CommitTimeout = 30 * time.Second
	// DueWakeCap caps a delay cursor's sleep (defaultFanoutDueWakeCap): keeps gauges fresh.
	DueWakeCap = 30 * time.Second
	// LagReportInterval is how often a cursor that is delivering a slab (a child commit or a
	// remote send being retried) re-reports its lag gauges from the parent's HWM, so they grow
	// during the outage instead of freezing at their last value.
	LagReportInterval = 1 * time.Second
)

// quickBackoffs are the waits between a bucket's quick tries: try, 100 ms, try, 200 ms, try.
var quickBackoffs = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}

// Config configures a Runner. Only Host is required; every zero duration or size takes the
// constant of the same name. Tests shorten the durations.
type Config struct {
	Host     Host
	Observer Observer     // nil → no metrics
	Logger   *slog.Logger // nil → discard
	// Now is the wall clock of this node: the delay gate (now − delay) and due lag read it.
	// nil → time.Now. Timers and sleeps always use real time.
	Now func() time.Time

	Tick            time.Duration // ReconcileInterval
	ForcedPassEvery time.Duration // ForcedPassEvery
	SweepEveryTicks int           // SweepEveryTicks
	MaxBatchRecords int           // MaxBatchRecords
	MaxBatchBytes   int           // MaxBatchBytes
	Linger          time.Duration // Linger
	LongPoll        time.Duration // LongPoll
	RetryBackoff    time.Duration // RetryBackoff
	MaxInFlight     int           // MaxInFlight
	CommitTimeout   time.Duration // CommitTimeout
	DueWakeCap      time.Duration // DueWakeCap
	LagReportEvery  time.Duration // LagReportInterval
	// RemoteClient is the HTTP client of every remote sender (tests); nil → one client per
	// remote link (NewRemoteHTTPClient).
	RemoteClient *http.Client
	// RemoteLanes is the number of lanes of a remote slab (SenderLanes).
	RemoteLanes int
	// RemoteBackoffCap caps the jittered backoff after a failed remote slab (RemoteBackoffCap).
	RemoteBackoffCap time.Duration
	// QuickBackoffs are the waits between quick tries of a bucket (len+1 tries); nil → 100 ms,
	// 200 ms.
	QuickBackoffs []time.Duration
}

func (c Config) withDefaults() Config {
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	setDur(&c.Tick, ReconcileInterval)
	setDur(&c.ForcedPassEvery, ForcedPassEvery)
	setDur(&c.Linger, Linger)
	setDur(&c.LongPoll, LongPoll)
	setDur(&c.RetryBackoff, RetryBackoff)
	setDur(&c.CommitTimeout, CommitTimeout)
	setDur(&c.DueWakeCap, DueWakeCap)
	setDur(&c.LagReportEvery, LagReportInterval)
	setInt(&c.SweepEveryTicks, SweepEveryTicks)
	setInt(&c.MaxBatchRecords, MaxBatchRecords)
	setInt(&c.MaxBatchBytes, MaxBatchBytes)
	setInt(&c.MaxInFlight, MaxInFlight)
	setInt(&c.RemoteLanes, SenderLanes)
	setDur(&c.RemoteBackoffCap, RemoteBackoffCap)
	if c.QuickBackoffs == nil {
		c.QuickBackoffs = quickBackoffs
	}
	return c
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

func setInt(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}
