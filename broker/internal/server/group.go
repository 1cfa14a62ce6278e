package server

import (
	"context"
	"sync"
)

// group owns a set of background loops: each runs with the group's context until stop
// cancels it, and stop returns once every loop has returned. A loop's error is its own to
// log; it does not stop the others (each keeps serving what it can).
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newGroup() *group {
	ctx, cancel := context.WithCancel(context.Background())
	return &group{ctx: ctx, cancel: cancel}
}

// run starts loop in its own goroutine.
func (g *group) run(loop func(ctx context.Context)) {
	g.wg.Go(func() { loop(g.ctx) })
}

// stop cancels the loops' context and waits for all of them; it may be called more than once.
func (g *group) stop() {
	g.cancel()
	g.wg.Wait()
}
