package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"narad.dev/broker/internal/meta"
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
// is in no replicated partition's ISR it returns at once and proposes nothing (a node that
// lost quorum does not wait for a flag it cannot set). Otherwise it
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
//     leads has a candidate (waiting cannot help those), or ctx ends;
//  4. then (also when what it still leads cannot move) leaves the ISR of each replicated
//     partition it follows whose ISR keeps min_insync_replicas members without it (op 23
//     under the current epoch — the shrink the leader would propose replica_lag_max after
//     the node stops fetching), so the leaders' HWM does not wait for it; leaders do not
//     expand the ISR to a stopping member. An ISR that would fall below M keeps it until
//     the leader shrinks it (§6).
//
// The elections are compare-and-set on the leader epoch, so they race the controller's own
// (the backstop in failover) safely: one takes effect, the other is refused and skipped.
func (c *Controller) HandOffLeaders(ctx context.Context) (left int, err error) {
	self := c.cfg.NodeID
	isSelf := func(id string) bool { return id == self }
	if !c.InReplicatedISR() {
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
		if led == stuck { // none led, or none can move: waiting cannot help
			return led, c.leaveISRs(ctx, self)
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

// InReplicatedISR reports whether this node's replica shows it in the ISR of a replicated
// partition (its leader always is): only then has a controlled shutdown anything to do.
func (c *Controller) InReplicatedISR() bool {
	return c.readLeaderView().inAnyISR(c.cfg.NodeID)
}

// isrExit is one op 23 a stopping node proposes to leave an ISR.
type isrExit struct {
	Topic     string
	Partition int
	Epoch     uint64
	From, To  []string // the ISR read, the ISR without the node
}

// planLeaveISR lists the replicated partitions led by another node whose ISR holds id and
// keeps at least the topic's min_insync_replicas members without it.
func (v *leaderView) planLeaveISR(id string) []isrExit {
	var out []isrExit
	for _, a := range v.parts {
		isr := a.InSync()
		if a.Owner == id || !slices.Contains(isr, id) || len(isr)-1 < v.topics[a.Topic].MinISR() {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(isr), func(r string) bool { return r == id })
		out = append(out, isrExit{Topic: a.Topic, Partition: a.Partition, Epoch: a.LeaderEpoch, From: isr, To: rest})
	}
	return out
}

// leaveISRs proposes planLeaveISR's changes for this node. A refusal (the epoch or the ISR
// moved on) is skipped: the leader shrinks the node out once it stops fetching.
func (c *Controller) leaveISRs(ctx context.Context, self string) error {
	for _, x := range c.readLeaderView().planLeaveISR(self) {
		res, _, err := c.store.SetISR(ctx, x.Topic, x.Partition, x.Epoch, x.From, x.To)
		switch {
		case err == nil && (res == meta.CASDone || res == meta.CASAlreadyDone):
			c.logger.Info("controlled shutdown: left the isr", "topic", x.Topic, "partition", x.Partition,
				"epoch", x.Epoch, "isr", x.To)
		case err == nil, errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrNotFound):
			c.logger.Debug("controlled shutdown: isr exit skipped", "topic", x.Topic, "partition", x.Partition, "err", err)
		default:
			return fmt.Errorf("leave the isr of %s/%d: %w", x.Topic, x.Partition, err)
		}
	}
	return nil
}

// inAnyISR reports whether id is in the ISR of a replicated partition (its leader always is).
func (v *leaderView) inAnyISR(id string) bool {
	for _, a := range v.parts {
		if slices.Contains(a.InSync(), id) {
			return true
		}
	}
	return false
}
