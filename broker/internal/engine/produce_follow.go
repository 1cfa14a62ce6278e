package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/wal"
)

// maxLeaderFollows bounds how often one batch is sent again because its partition's
// leadership moved while the commit was pending (each move is an epoch bump, so this is a
// bound on failovers during one produce, not a retry budget).
const maxLeaderFollows = 3

// errLeaderMoved: the batch's commit was abandoned because the partition's leader epoch moved
// while it was pending, and it could follow no further (503, retry; the outcome is unknown).
var errLeaderMoved = fmt.Errorf("%w: the partition's leadership moved during the commit; retry", errcode.ErrUnavailable)

// commitRemoteFollowing runs op 11 at addr, the leader of replicated partition p as of leader
// epoch epoch, and watches the local replica while it is pending (docs/internals/replication.md
// §4): when the assignment's epoch moves past epoch (a failover or a reassignment elected
// another leader), the call is cancelled and moved is true, so the caller sends the batch
// again to the new leader instead of waiting for a deposed or frozen one until the client's
// deadline. The abandoned call's outcome is unknown: its records may also be committed (a
// duplicate), never lost, since 202 is answered only for a commit that returned nil.
func (e *Engine) commitRemoteFollowing(ctx context.Context, t meta.Topic, p int, addr string, epoch uint64, recs []wal.Record) (moved bool, err error) {
	if e.meta == nil { // unit tests without a metastore: nothing to watch
		return false, e.peers.CommitRemote(ctx, addr, t.Name, t.Incarnation, p, recs)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var leaderMoved atomic.Bool
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			next := e.meta.NextApply() // taken before the read, so no apply is missed
			// The cached view, not a metastore read: every apply moves its version first.
			if a, ok := e.view.Assignment(t.Name, p); ok && a.LeaderEpoch > epoch {
				leaderMoved.Store(true)
				cancel()
				return
			}
			select {
			case <-next:
			case <-stop:
				return
			case <-cctx.Done():
				return
			}
		}
	}()
	err = e.peers.CommitRemote(cctx, addr, t.Name, t.Incarnation, p, recs)
	close(stop)
	<-watched
	if err != nil && leaderMoved.Load() && ctx.Err() == nil {
		return true, err
	}
	return false, err
}
