package engine

import (
	"fmt"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
	"narad.dev/broker/internal/service"
)

// alterReplication applies req's replication settings to t, the topic record an alter is
// building (docs/replication.md, Changing the replication factor): R changes only within
// 2 … 5 (1 ↔ ≥ 2 is ErrConflict: a single-replica topic writes through the ingress WAL, a
// replicated one does not), M must stay ≤ R (ErrInvalid), and a raised R needs that many
// live, non-draining members (ErrNotEnoughMembers, 422). It reports whether req changes
// replication at all. The replica sets follow through the controller's reassignment (C12).
func (e *Engine) alterReplication(t *meta.Topic, req service.AlterTopicRequest) (bool, error) {
	if !req.ChangesReplication() {
		return false, nil
	}
	cur := t.RF()
	if req.ReplicationFactor != nil {
		r := *req.ReplicationFactor
		if r < 1 || r > meta.MaxReplicationFactor {
			return false, fmt.Errorf("replication_factor must be 1 … %d, not %d: %w", meta.MaxReplicationFactor, r, errcode.ErrInvalid)
		}
		if r != cur && (r == 1) != (cur == 1) {
			return false, fmt.Errorf("replication_factor cannot change between 1 and %d on a live topic: %w", max(r, cur), errcode.ErrConflict)
		}
		if r > cur {
			if n := len(placement.Nodes(e.meta.Members())); r > n {
				return false, fmt.Errorf("replication_factor %d with %d live members: %w", r, n, errcode.ErrNotEnoughMembers)
			}
		}
		t.ReplicationFactor = r
		if r == 1 {
			t.ReplicationFactor = 0
		}
	}
	if req.MinInsyncReplicas != nil {
		t.MinInsyncReplicas = *req.MinInsyncReplicas
	}
	if req.UncleanLeaderElection != nil {
		t.UncleanLeaderElection = *req.UncleanLeaderElection
	}
	if t.MinInsyncReplicas < 0 || t.MinInsyncReplicas > t.RF() {
		return false, fmt.Errorf("min_insync_replicas %d would exceed replication_factor %d: %w",
			t.MinInsyncReplicas, t.RF(), errcode.ErrInvalid)
	}
	return true, nil
}
