package controller

import (
	"context"
	"errors"
	"fmt"

	"narad.dev/broker/internal/meta"
)

// failover is C10 (docs/internals/replication.md §7): elect a new leader for every replicated
// partition whose leader failed (planFailover), and for every one whose leader is stopping
// (planShutdown, §9: the stopping node proposes these itself, this is the backstop). A
// partition that has to wait is logged at error once per leadership, and logged again if it
// recovers and fails again.
func (c *Controller) failover(ctx context.Context) error {
	v := c.readLeaderView()
	plan := v.planFailover()
	shutdown, _, _ := v.planShutdown(nil)
	plan.elections = append(plan.elections, shutdown...)
	waiting := make(map[string]bool, len(plan.waiting))
	for _, a := range plan.waiting {
		key := leaderlessKey(a.Topic, a.Partition)
		waiting[key] = true
		if c.noteOnce(key) {
			c.logger.Error("partition has no leader: no live in-sync replica to elect", "topic", a.Topic,
				"partition", a.Partition, "leader", a.Owner, "epoch", a.LeaderEpoch, "isr", a.InSync(),
				"unclean_leader_election", v.topics[a.Topic].UncleanLeaderElection)
		}
	}
	for _, a := range v.parts {
		if key := leaderlessKey(a.Topic, a.Partition); !waiting[key] {
			c.forgetNote(key)
		}
	}
	return c.elect(ctx, plan.elections)
}

// preferredLeaders is C11 (docs/internals/replication.md §9): give partitions back to their
// preferred leaders on nodes whose leader imbalance exceeds LeaderImbalancePercent, at most
// MaxPreferredElections per pass.
func (c *Controller) preferredLeaders(ctx context.Context) error {
	return c.elect(ctx, c.readLeaderView().planPreferred(MaxPreferredElections))
}

func leaderlessKey(topic string, p int) string { return fmt.Sprintf("leaderless/%s/%d", topic, p) }

// readLeaderView reads topics, members and assignments for the election planners.
func (c *Controller) readLeaderView() *leaderView {
	c.mu.Lock()
	since := c.leaderSince
	c.mu.Unlock()
	return newLeaderView(c.cfg.NodeID, c.now(), since, c.cfg.ReplicaFailoverAfter,
		c.store.Topics("", 0), c.store.Members(), c.store.AllAssignments())
}

// elect proposes each election (op 24, CAS on the leader epoch the plan read). A refusal —
// a stale epoch (another election or a move got there first), a replica set that changed, a
// topic or partition gone — is skipped: the next pass plans on the new record. Each election
// that took effect is logged, audited (cluster.leader.elect) and counted in
// narad_leader_elections_total{reason}; one whose fate is unknown is audited as such and ends
// the duty.
func (c *Controller) elect(ctx context.Context, es []election) error {
	_, err := c.electDone(ctx, es)
	return err
}

// electDone is elect, also answering the elections that took effect, each with the epoch the
// partition got.
func (c *Controller) electDone(ctx context.Context, es []election) (done []election, err error) {
	for _, e := range es {
		res, cur, err := c.store.ElectLeader(ctx, e.Topic, e.Partition, e.Epoch, e.To, e.Reason)
		target := fmt.Sprintf("%s/%d", e.Topic, e.Partition)
		switch {
		case err == nil && (res == meta.CASDone || res == meta.CASAlreadyDone):
			c.logger.Info("partition leader elected", "topic", e.Topic, "partition", e.Partition,
				"leader", e.To, "previous", e.From, "reason", e.Reason, "epoch", cur.LeaderEpoch)
			c.audit(ctx, "cluster.leader.elect", target, nil, "leader", e.To, "previous", e.From,
				"reason", e.Reason, "epoch", cur.LeaderEpoch)
			if m := c.cfg.Metrics; m != nil {
				m.LeaderElections.WithLabelValues(e.Reason).Inc()
			}
			e.Epoch = cur.LeaderEpoch
			done = append(done, e)
		case err == nil:
		case errors.Is(err, meta.ErrConflict), errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalid):
			c.logger.Debug("leader election skipped", "topic", e.Topic, "partition", e.Partition,
				"leader", e.To, "reason", e.Reason, "epoch", e.Epoch, "current_epoch", cur.LeaderEpoch,
				"current_leader", cur.Owner, "err", err)
		default:
			c.audit(ctx, "cluster.leader.elect", target, err, "leader", e.To, "previous", e.From,
				"reason", e.Reason, "epoch", e.Epoch+1)
			return done, err
		}
	}
	return done, nil
}
