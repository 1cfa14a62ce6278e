package move

import (
	"context"
	"log/slog"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/transfer"
)

// Store is the subset of *meta.Store the runner and its workers read and propose through.
// Reads are the local replica's; ConfirmAssignment is the leader-confirmed read of
// docs/internals/metastore.md §9 (an error means unconfirmed); CompleteMove is the flip CAS (op 16;
// result 0 with an error means the outcome is unknown). Methods may be called from any
// goroutine.
type Store interface {
	NodeID() string
	AppliedCaughtUp() bool
	LatestDomainVersion() uint64
	Topics(after string, limit int) []meta.Topic
	Topic(name string) (meta.Topic, bool)
	Assignments(topic string) []meta.Assignment
	Assignment(topic string, partition int) (meta.Assignment, bool)
	Member(id string) (meta.Member, bool)
	CompleteMove(ctx context.Context, topic string, p int, expectedOwner, target string) (meta.CASResult, meta.Assignment, error)
	ConfirmAssignment(ctx context.Context, topic string, partition int) (meta.Assignment, bool, error)
}

var _ Store = (*meta.Store)(nil)

// Sweeper is the stale-copy sweep the runner drives (docs/internals/moves.md §2 rule 5, §9).
type Sweeper interface {
	Sweep(ctx context.Context) error
}

// Defaults of the move constants (docs/internals/moves.md §16).
const (
	DefaultTick              = time.Second      // the runner's reconcile tick
	DefaultFullPassEvery     = 30 * time.Second // a full pass at least this often
	DefaultSweepEveryTicks   = 30               // the stale-copy sweep's cadence, in ticks
	DefaultRetryBackoff      = 2 * time.Second  // a worker retries in place this long after a failure
	DefaultPassPacing        = 50 * time.Millisecond
	DefaultFetchesInFlight   = 8              // keeps the link busy while one chunk is written
	DefaultLagBytes          = int64(4 << 20) // CatchUp converged: a pass copied at most this
	DefaultMaxPasses         = 20             // CatchUp freezes anyway after this many passes
	DefaultNoProgressPasses  = 3              // … or after this many passes without a new minimum
	DefaultReproposeLimit    = 2 * time.Minute
	DefaultRenameBackDelay   = 15 * time.Second
	DefaultForcePromoteAfter = 2 * time.Minute
	DefaultCallTimeout       = 10 * time.Second // one RPC, proposal or leader read
)

// RunnerConfig configures a Runner. Every duration or count left 0 takes its default; tests
// shrink them. Units are in the field comments.
type RunnerConfig struct {
	// NodeID is this node's ID: workers run for assignments whose target it is.
	NodeID string
	// Store is the metastore (required).
	Store Store
	// Source is the client of the owners' transfer endpoints (required).
	Source transfer.Source
	// Local is this node's engine (required).
	Local transfer.Local
	// Sweeper is the stale-copy sweep; nil runs none.
	Sweeper Sweeper
	// Metrics receives the moves families; nil records none.
	Metrics *metrics.Metrics
	// Logger receives the move logs; nil discards.
	Logger *slog.Logger
	// Now is the clock of every decision (ages, the 2-min and 15-s rules); nil → time.Now.
	// Its readings must carry a monotonic component for the "own clock" rules, as
	// time.Now's do.
	Now func() time.Time

	Tick            time.Duration // reconcile tick (1 s)
	FullPassEvery   time.Duration // a full pass at least this often (30 s)
	SweepEveryTicks int           // stale-copy sweep every N-th tick, skipped ticks included (30)

	RetryBackoff     time.Duration // wait before a worker retries in place (2 s)
	PassPacing       time.Duration // pause between CatchUp passes (50 ms)
	ChunkBytes       int           // bytes per fetch (transfer.ChunkBytes = 1 MiB)
	FetchesInFlight  int           // chunk fetches of one segment in flight at once (8)
	LagBytes         int64         // CatchUp converged when a pass copies ≤ this (4 MiB)
	MaxPasses        int           // CatchUp passes before freezing anyway (20)
	NoProgressPasses int           // passes without a new minimum before freezing anyway (3)

	FreezeTTL  time.Duration // asked of the source per arm/re-arm (transfer.FreezeTTL = 30 s)
	RearmEvery time.Duration // re-arm period while the freeze is needed (FreezeTTL/4)

	ReproposeLimit    time.Duration // re-propose an unknown flip at most this long (2 min)
	RenameBackDelay   time.Duration // a confirming read must start this long after the last unknown proposal (15 s)
	ForcePromoteAfter time.Duration // source dead this long, by its stamp and our own clock (2 min)
	FutureMtimeSkew   time.Duration // a listed mtime further ahead of listed_at is ignored (1 h)
	CallTimeout       time.Duration // bound of one RPC, proposal or leader read (10 s)
}

func (c RunnerConfig) withDefaults() RunnerConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NodeID == "" && c.Store != nil {
		c.NodeID = c.Store.NodeID()
	}
	setDur(&c.Tick, DefaultTick)
	setDur(&c.FullPassEvery, DefaultFullPassEvery)
	if c.SweepEveryTicks <= 0 {
		c.SweepEveryTicks = DefaultSweepEveryTicks
	}
	setDur(&c.RetryBackoff, DefaultRetryBackoff)
	setDur(&c.PassPacing, DefaultPassPacing)
	if c.ChunkBytes <= 0 || c.ChunkBytes > transfer.ChunkBytes {
		c.ChunkBytes = transfer.ChunkBytes
	}
	if c.FetchesInFlight <= 0 {
		c.FetchesInFlight = DefaultFetchesInFlight
	}
	if c.LagBytes <= 0 {
		c.LagBytes = DefaultLagBytes
	}
	if c.MaxPasses <= 0 {
		c.MaxPasses = DefaultMaxPasses
	}
	if c.NoProgressPasses <= 0 {
		c.NoProgressPasses = DefaultNoProgressPasses
	}
	setDur(&c.FreezeTTL, transfer.FreezeTTL)
	setDur(&c.RearmEvery, c.FreezeTTL/4)
	setDur(&c.ReproposeLimit, DefaultReproposeLimit)
	setDur(&c.RenameBackDelay, DefaultRenameBackDelay)
	setDur(&c.ForcePromoteAfter, DefaultForcePromoteAfter)
	setDur(&c.FutureMtimeSkew, transfer.FutureMtimeSkew)
	setDur(&c.CallTimeout, DefaultCallTimeout)
	return c
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
