package controller

import (
	"context"
	"fmt"
	"slices"

	"narad.dev/broker/internal/meta"
)

// Leader-side labels of narad_moves_blocked{reason} (docs/internals/moves.md §14); the destination
// sets the others (copy_unverifiable, source_dead_copy_behind).
const (
	BlockedSourceDead = "source_dead" // the move's source is dead or not a member
	BlockedTargetDead = "target_dead" // the move's target is dead
)

// exportBlocked is C7 (docs/internals/moves.md §10, §12.4): narad_moves_blocked{reason="source_dead"}
// and {reason="target_dead"} are set to the number of in-flight moves blocked that way, each
// such move logged once per leadership at error; narad_decommission_blocked{node,reason} is
// 1 for each reason C6 found this pass, and the series of reasons that cleared are deleted.
// Every gauge is zeroed or deleted when leadership is lost (resetLeaderMetrics).
func (c *Controller) exportBlocked(_ context.Context) error {
	members := memberMap(c.store.Members())
	sourceDead, targetDead := 0, 0
	for _, a := range c.store.AllAssignments() {
		if a.Target == "" {
			continue
		}
		move := fmt.Sprintf("%s/%d/%s/%s", a.Topic, a.Partition, a.Owner, a.Target)
		if src, ok := members[a.Owner]; !ok || src.Status == meta.MemberDead {
			sourceDead++
			if c.noteOnce("move-blocked/" + BlockedSourceDead + "/" + move) {
				c.logger.Error("move blocked: its source is dead or not a member", "topic", a.Topic,
					"partition", a.Partition, "owner", a.Owner, "target", a.Target, "owner_is_member", ok)
			}
		}
		if dst, ok := members[a.Target]; ok && dst.Status == meta.MemberDead {
			targetDead++
			if c.noteOnce("move-blocked/" + BlockedTargetDead + "/" + move) {
				c.logger.Error("move blocked: its target is dead", "topic", a.Topic,
					"partition", a.Partition, "owner", a.Owner, "target", a.Target)
			}
		}
	}
	if m := c.cfg.Metrics; m != nil {
		m.MovesBlocked.WithLabelValues(BlockedSourceDead).Set(float64(sourceDead))
		m.MovesBlocked.WithLabelValues(BlockedTargetDead).Set(float64(targetDead))
	}
	c.exportDecommissionBlocked(c.DecommissionBlocked())
	return nil
}

// exportDecommissionBlocked makes narad_decommission_blocked hold exactly found's series.
func (c *Controller) exportDecommissionBlocked(found map[string][]string) {
	m := c.cfg.Metrics
	if m == nil {
		return
	}
	c.expMu.Lock()
	defer c.expMu.Unlock()
	for node, reasons := range c.exported {
		for r := range reasons {
			if !slices.Contains(found[node], r) {
				m.DecommissionBlocked.DeleteLabelValues(node, r)
				delete(reasons, r)
			}
		}
		if len(reasons) == 0 {
			delete(c.exported, node)
		}
	}
	for node, reasons := range found {
		for _, r := range reasons {
			m.DecommissionBlocked.WithLabelValues(node, r).Set(1)
			if c.exported[node] == nil {
				c.exported[node] = map[string]bool{}
			}
			c.exported[node][r] = true
		}
	}
}

// resetLeaderMetrics zeroes the leader's move gauges and deletes every
// narad_decommission_blocked series: they describe one leadership only.
func (c *Controller) resetLeaderMetrics() {
	m := c.cfg.Metrics
	if m == nil {
		return
	}
	m.MovesBlocked.WithLabelValues(BlockedSourceDead).Set(0)
	m.MovesBlocked.WithLabelValues(BlockedTargetDead).Set(0)
	c.exportDecommissionBlocked(nil)
}

// DecommissionBlocked returns the reasons the latest pass found for each draining member
// (docs/internals/http-api.md §2.16 decommission_blocked): an empty slice when nothing blocks it; members
// that are not draining have no entry. Empty off the leader. The result is a copy.
func (c *Controller) DecommissionBlocked() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]string, len(c.decomBlocked))
	for id, rs := range c.decomBlocked {
		out[id] = append([]string{}, rs...)
	}
	return out
}

// setDecomBlocked records C6's findings and logs each (node, reason) once while it holds:
// a reason that clears is forgotten, so it is logged again if it recurs. move_target is
// logged at error, the others at warn.
func (c *Controller) setDecomBlocked(found map[string][]string) {
	c.mu.Lock()
	old := c.decomBlocked
	c.decomBlocked = found
	c.mu.Unlock()
	for node, reasons := range found {
		for _, r := range reasons {
			if !c.noteOnce("decommission-blocked/" + node + "/" + r) {
				continue
			}
			level := c.logger.Warn
			if r == ReasonMoveTarget {
				level = c.logger.Error
			}
			level("decommission blocked", "member", node, "reason", r)
		}
	}
	for node, reasons := range old {
		for _, r := range reasons {
			if !slices.Contains(found[node], r) {
				c.forgetNote("decommission-blocked/" + node + "/" + r)
			}
		}
	}
}

// dropDecomBlocked forgets id's findings (its decommission was cancelled).
func (c *Controller) dropDecomBlocked(id string) {
	found := c.DecommissionBlocked()
	delete(found, id)
	c.setDecomBlocked(found)
}
