package controller

import (
	"context"
	"fmt"
	"time"
)

// Controlled shutdown (docs/internals/replication.md §9): a stopping node moves leadership of
// the replicated partitions it leads to other live in-sync replicas before it stops serving.

const (
	// ShutdownHandOffTimeout bounds a stopping node's wait for its replicated partitions to
	// get other leaders; what is still led then fails over (§7) once the node is gone.
	ShutdownHandOffTimeout = 10 * time.Second
	// shutdownPoll is how often HandOffLeaders re-reads this node's view while it waits.
	shutdownPoll = 100 * time.Millisecond
)

// HandOffLeaders is this node's controlled shutdown; it runs on any node, Raft leader or not,
// and returns how many replicated partitions this node still leads when it gives up. When it
// leads none it returns at once and proposes nothing. Otherwise it
//
//  1. marks this member stopping (op 7 with the stopping flag, forwarded to the Raft leader
//     like every heartbeat) so that no election planner — this one, the controller's
//     failover and preferred-leader duties — picks it while it stops, and proposes the flag
//     again while the replica does not show it (a plain heartbeat in flight may land after);
//  2. proposes op 24 (reason shutdown) for each partition it leads to the first live ISR
//     member in replica order (planShutdown), through the metastore like the heartbeat; each
//     election is logged, audited and counted as the controller's are (elect), and proposed
//     once per epoch;
//  3. waits until this node's replica shows it leading none, or until no partition it still
//     leads has a candidate (waiting cannot help those), or ctx ends.
//
// The elections are compare-and-set on the leader epoch, so they race the controller's own
// (the backstop in failover) safely: one takes effect, the other is refused and skipped.
func (c *Controller) HandOffLeaders(ctx context.Context) (left int, err error) {
	self := c.cfg.NodeID
	isSelf := func(id string) bool { return id == self }
	if _, led, _ := c.readLeaderView().planShutdown(isSelf); led == 0 {
		return 0, nil
	}
	proposed := map[string]uint64{} // topic/partition → the epoch an election was proposed under
	tick := time.NewTicker(shutdownPoll)
	defer tick.Stop()
	for {
		if m, ok := c.store.Member(self); !ok || !m.Stopping {
			if err := c.store.MemberStopping(ctx, self, c.now().Unix()); err != nil {
				return c.stillLed(isSelf), fmt.Errorf("mark %s stopping: %w", self, err)
			}
		}
		es, led, stuck := c.readLeaderView().planShutdown(isSelf)
		if led == 0 || led == stuck {
			return led, nil
		}
		fresh := es[:0]
		for _, e := range es {
			key := fmt.Sprintf("%s/%d", e.Topic, e.Partition)
			if ep, ok := proposed[key]; !ok || ep != e.Epoch {
				proposed[key] = e.Epoch
				fresh = append(fresh, e)
			}
		}
		if err := c.elect(ctx, fresh); err != nil {
			return led, err
		}
		select {
		case <-ctx.Done():
			return c.stillLed(isSelf), ctx.Err()
		case <-tick.C:
		}
	}
}

// stillLed counts the replicated partitions this node's replica shows led by a node in self.
func (c *Controller) stillLed(self func(string) bool) int {
	_, led, _ := c.readLeaderView().planShutdown(self)
	return led
}
