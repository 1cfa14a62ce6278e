package controller

import (
	"context"
	"fmt"
	"slices"

	"narad.dev/broker/internal/meta"
)

// On-demand leader elections (POST /v1/cluster/elect-leaders, docs/internals/http-api.md
// §2.22): the Raft leader runs one of the election planners now, over every replicated
// partition or the ones named.

// ElectRequest selects the planner and the partitions of one on-demand election.
type ElectRequest struct {
	// Preferred: move leadership to each partition's preferred leader (replicas[0]) when it
	// is live, in the ISR and not draining, whatever the node's imbalance; otherwise elect a
	// leader for each partition whose leader failed, from the ISR only (planFailover without
	// unclean elections).
	Preferred bool
	Topic     string // "" = every replicated topic
	Partition int    // < 0 = every partition of Topic; ≥ 0 needs Topic
}

// Election is one leader election that took effect: To leads Topic/Partition at Epoch,
// From led it before, for Reason (meta.ElectDead, ElectPreferred, …).
type Election struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Reason    string `json:"reason"`
	Epoch     uint64 `json:"epoch"`
}

// ElectLeaders runs req's planner once, on the leader after a barrier and under the placement
// lock like the election duties, and answers the elections that took effect (empty when none
// was needed). Each is logged, audited and counted like the duties' (elect). Off the leader:
// meta.ErrNotLeader; a partition without a topic: meta.ErrInvalid; an unknown topic or
// partition: meta.ErrNotFound; a proposal of unknown fate: the metastore's error, with the
// elections made before it.
func (c *Controller) ElectLeaders(ctx context.Context, req ElectRequest) ([]Election, error) {
	if req.Partition >= 0 && req.Topic == "" {
		return nil, fmt.Errorf("%w: a partition needs its topic", meta.ErrInvalid)
	}
	if err := c.leaderBarrier(ctx, "elect leaders"); err != nil {
		return nil, err
	}
	c.placement.Lock()
	defer c.placement.Unlock()
	v := c.readLeaderView()
	if err := v.narrow(req.Topic, req.Partition); err != nil {
		return nil, err
	}
	var plan []election
	if req.Preferred {
		plan = v.preferredPlan(len(v.parts), true)
	} else {
		plan = slices.DeleteFunc(v.planFailover().elections, func(e election) bool { return e.Reason == meta.ElectUnclean })
	}
	done, err := c.electDone(ctx, plan)
	out := make([]Election, len(done))
	for i, e := range done {
		out[i] = Election{Topic: e.Topic, Partition: e.Partition, From: e.From, To: e.To, Reason: e.Reason, Epoch: e.Epoch}
	}
	return out, err
}

// narrow keeps the partitions of topic ("" = all) and of partition (< 0 = all) in the view:
// meta.ErrNotFound for a topic that does not exist or a partition it does not have. A topic
// with replication_factor 1 exists but has no partition to elect for.
func (v *leaderView) narrow(topic string, partition int) error {
	if topic == "" {
		return nil
	}
	t, ok := v.topics[topic]
	if !ok {
		return fmt.Errorf("%w: topic %q", meta.ErrNotFound, topic)
	}
	if partition >= t.Partitions {
		return fmt.Errorf("%w: partition %d of topic %q", meta.ErrNotFound, partition, topic)
	}
	v.parts = slices.DeleteFunc(v.parts, func(a meta.Assignment) bool {
		return a.Topic != topic || partition >= 0 && a.Partition != partition
	})
	return nil
}
