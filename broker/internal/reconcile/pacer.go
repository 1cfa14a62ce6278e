package reconcile

import (
	"context"
	"sync/atomic"
	"time"
)

// Pacer runs a runner's ticks and applies the skip rule (see the package doc). The zero
// value is not usable: set Tick, FullPassEvery and Now. The tick state is owned by the
// goroutine calling Run (or Step); Passes and Skips may be read from any goroutine.
type Pacer struct {
	Tick          time.Duration    // interval between ticks
	FullPassEvery time.Duration    // the longest a tick may skip the full pass
	Now           func() time.Time // the clock FullPassEvery is measured with

	lastVersion uint64
	lastFull    time.Time
	haveFull    bool
	forceNext   bool

	passes atomic.Int64
	skips  atomic.Int64
}

// Run calls tick at once and then every Tick until ctx ends.
func (p *Pacer) Run(ctx context.Context, tick func(context.Context)) {
	t := time.NewTicker(p.Tick)
	defer t.Stop()
	for {
		tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step runs pass unless the skip rule lets this tick skip it: it runs on the first Step,
// after a pass that returned false, when force is set, when version differs from the
// version of the last pass, and when FullPassEvery has elapsed since the last pass. pass
// reports whether it finished its work. Step reports whether pass ran.
func (p *Pacer) Step(version uint64, force bool, pass func() bool) bool {
	now := p.Now()
	force = force || !p.haveFull || p.forceNext || now.Sub(p.lastFull) >= p.FullPassEvery
	if !force && version == p.lastVersion {
		p.skips.Add(1)
		return false
	}
	ok := pass()
	p.passes.Add(1)
	p.haveFull, p.lastVersion, p.lastFull, p.forceNext = true, version, now, !ok
	return true
}

// Passes is the number of passes run.
func (p *Pacer) Passes() int64 { return p.passes.Load() }

// Skips is the number of ticks that skipped the pass.
func (p *Pacer) Skips() int64 { return p.skips.Load() }
