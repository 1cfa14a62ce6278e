package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

// Owner calls: at most ownerCallsInFlight partitions are asked at once, each for at most
// ownerCallTimeout (a frozen owner must not hold a listing or an attach).
const (
	ownerCallsInFlight = 16
	ownerCallTimeout   = 2 * time.Second
)

// LinksConfig is what Links is built over.
type LinksConfig struct {
	NodeConfig
	// Peers is the node RPC client. nil: partitions owned elsewhere cannot be asked.
	Peers Peers
	// HTTPClient is the client of the remote-link attach-time target checks; nil → a client
	// per check.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// NewEpoch returns a fresh attach epoch (16 hex chars).
	NewEpoch func() string
}

// Links is the node's service side of the links: the children listing, the attach point
// and a remote link's start point, remote attach and detach, and the one-shot sealing of
// remote passwords an older version stored in clear.
type Links struct {
	cfg    LinksConfig
	status Status // bound by Bind; nil: the listing shows file state only
}

// NewLinks returns the links over cfg.
func NewLinks(cfg LinksConfig) *Links {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Links{cfg: cfg}
}

// Bind binds the runner whose live cursor state the listing shows. The runner is built over
// the node that serves these links, so it is bound after construction: call Bind once,
// before the listing is served.
func (l *Links) Bind(s Status) { l.status = s }

// inParallel runs call(i) for every i in [0, n) with at most ownerCallsInFlight calls in
// flight (partition reports are fetched 16 at a time, not one round trip after another) and
// returns when all have returned. call writes its own result slot.
func inParallel(n int, call func(i int)) {
	sem := make(chan struct{}, ownerCallsInFlight)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			call(i)
		}()
	}
	wg.Wait()
}

// askable reports whether a partition owned elsewhere can be asked over node RPC.
func (l *Links) askable(o Owner) bool {
	return o.Known && !o.Dead && o.Addr != "" && l.cfg.Peers != nil
}

// AttachPoint reads the committed high watermark of every partition of parent: a local read
// (opening the log: exact) or one exact stats call per remote partition, 16 in flight. Any
// owner that cannot be asked fails it with ErrUnavailable (docs/internals/fanout.md §5).
func (l *Links) AttachPoint(ctx context.Context, parent meta.Topic) ([]int64, error) {
	out := make([]int64, parent.Partitions)
	errs := make([]error, parent.Partitions)
	inParallel(parent.Partitions, func(p int) { out[p], errs[p] = l.partitionHWM(ctx, parent, p) })
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: the attach point of %q could not be read on every partition: %v", errcode.ErrUnavailable, parent.Name, err)
	}
	return out, nil
}

// partitionHWM is one partition's committed high watermark, asked of its owner.
func (l *Links) partitionHWM(ctx context.Context, t meta.Topic, p int) (int64, error) {
	o := l.cfg.Node.Owner(t.Name, p)
	switch {
	case o.Local:
		return l.cfg.Node.ExactHighWatermark(t, p)
	case !l.askable(o):
		return 0, fmt.Errorf("partition %d: owner %q cannot be asked", p, o.ID)
	}
	sctx, cancel := context.WithTimeout(ctx, ownerCallTimeout)
	defer cancel()
	return l.cfg.Peers.ExactHighWatermark(sctx, o.Addr, t.Name, p)
}

// AttachChildAsLeader reads the attach point and proposes the link child → parent with a
// fresh epoch. afterPoint, when not nil, runs between the reads and the proposal (tests:
// records committed there must still reach the child).
func (l *Links) AttachChildAsLeader(ctx context.Context, parent, child string, delayMs int64, afterPoint func()) error {
	pt, ok := l.cfg.Node.Topic(parent)
	if !ok {
		return fmt.Errorf("topic %q: %w", parent, errcode.ErrNotFound)
	}
	if _, ok := l.cfg.Node.Topic(child); !ok {
		return fmt.Errorf("topic %q: %w", child, errcode.ErrNotFound)
	}
	offsets, err := l.AttachPoint(ctx, pt)
	if err != nil {
		return err
	}
	if afterPoint != nil {
		afterPoint()
	}
	return l.cfg.Meta.AttachChild(ctx, parent, child, l.cfg.NewEpoch(), delayMs, offsets)
}

// Host returns the Host over the same node (NodeHost).
func (l *Links) Host() Host { return NewNodeHost(l.cfg.NodeConfig) }
