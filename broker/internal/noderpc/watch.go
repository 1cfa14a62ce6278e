package noderpc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

// Watcher cadences.
const (
	watchRescan     = 1 * time.Second        // how often the member list is re-read
	watchBackoffMin = 200 * time.Millisecond // first retry after a stream failed
	watchBackoffMax = 2 * time.Second
)

// WatchPeers keeps one WatchCommits stream (op 33) open to every other member, feeding each
// notice into the engine so queue long-polls parked here wake within milliseconds of a commit
// on the partition's owner, instead of waiting for the next re-probe.
// It returns when ctx ends.
func WatchPeers(ctx context.Context, store *meta.Store, e *engine.Engine, p Peers, self string, logger *slog.Logger) {
	type watch struct {
		addr   string
		cancel context.CancelFunc
	}
	var wg sync.WaitGroup
	running := map[string]watch{}
	defer func() {
		for _, w := range running {
			w.cancel()
		}
		wg.Wait()
	}()
	t := time.NewTicker(watchRescan)
	defer t.Stop()
	for {
		want := map[string]string{}
		for _, m := range store.Members() {
			if m.ID != self && m.ClusterAddr != "" {
				want[m.ID] = m.ClusterAddr
			}
		}
		for id, w := range running {
			if want[id] != w.addr {
				w.cancel()
				delete(running, id)
			}
		}
		for id, addr := range want {
			if _, ok := running[id]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			running[id] = watch{addr: addr, cancel: cancel}
			wg.Add(1)
			go func() {
				defer wg.Done()
				watchOne(wctx, e, p, self, id, addr, logger)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watchOne holds the stream to one peer, re-opening it with backoff until ctx ends.
func watchOne(ctx context.Context, e *engine.Engine, p Peers, self, id, addr string, logger *slog.Logger) {
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		if received := streamNotices(ctx, e, p, self, addr); received {
			backoff = watchBackoffMin
		}
		if ctx.Err() != nil {
			return
		}
		logger.Debug("commit-notice stream to peer ended; re-opening", "peer", id, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, watchBackoffMax)
	}
}

// streamNotices runs one stream until it fails; received reports whether anything arrived.
func streamNotices(ctx context.Context, e *engine.Engine, p Peers, self, addr string) (received bool) {
	c, err := p.client(addr)
	if err != nil {
		return false
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.WatchCommits(sctx, &nodepb.WatchCommitsRequest{NodeId: self})
	if err != nil {
		return false
	}
	// A frozen peer sends nothing, not even keep-alives: give up on the stream after three
	// missed keep-alives so it is re-opened once the peer answers again.
	alive := make(chan struct{}, 1)
	go func() {
		tm := time.NewTimer(3 * noticeKeepAlive)
		defer tm.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-alive:
				if !tm.Stop() {
					<-tm.C
				}
				tm.Reset(3 * noticeKeepAlive)
			case <-tm.C:
				cancel()
				return
			}
		}
	}()
	for {
		msg, err := stream.Recv()
		if err != nil {
			return received
		}
		received = true
		select {
		case alive <- struct{}{}:
		default:
		}
		for _, r := range msg.Partitions {
			e.RemoteNotice(r.Topic, int(r.Partition))
		}
	}
}
