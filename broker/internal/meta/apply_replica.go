package meta

import (
	"fmt"
	"slices"
)

// The replication ops (docs/internals/replication.md §2). Each is a compare-and-set on the
// partition's leader epoch: a command that names an epoch the partition has left is refused
// with OutcomeStaleEpoch (ErrStaleEpoch), and one that would break the invariants of
// Assignment with OutcomeBadReplicaSet (ErrBadReplicaSet); both carry the current record.
// A command whose effect already holds (a retried proposal) is OutcomeAlreadyDone.

// setISR is op 23: the leader of epoch leader_epoch replaces the ISR expected_isr with
// new_isr. Shrink and expand are the same op; new_isr must hold the leader and only
// replicas. The epoch does not change.
func (x *txn) setISR(c *setISRCmd) Result {
	if !validNodeList(c.NewISR) {
		return invalid("set isr %s/%d: bad new_isr", c.Topic, c.Partition)
	}
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	switch {
	case a.LeaderEpoch != c.LeaderEpoch:
		return staleEpoch(a, c.LeaderEpoch)
	case sameSet(a.InSync(), c.NewISR):
		return Result{Outcome: OutcomeAlreadyDone, Assignment: a}
	case !sameSet(a.InSync(), c.ExpectedISR):
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: fmt.Sprintf("isr is %v", a.InSync())}
	case !subset(c.NewISR, a.ReplicaSet()):
		return badReplicaSet(a, "new isr %v is not within replicas %v", c.NewISR, a.ReplicaSet())
	case !slices.Contains(c.NewISR, a.Owner):
		return badReplicaSet(a, "new isr %v leaves out the leader %s", c.NewISR, a.Owner)
	}
	a.ISR = inReplicaOrder(a.ReplicaSet(), c.NewISR)
	a = x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

// electLeader is op 24: the controller makes new_leader the leader of epoch
// expected_epoch + 1. The new leader must be in the ISR; for reason "unclean" it may be any
// replica when the topic allows unclean election, and the ISR becomes [new_leader] (the
// other replicas truncate to it and rejoin). Replicas (and so the preferred leader) do not
// change. Electing the current leader again is allowed: the epoch bump fences its old term.
func (x *txn) electLeader(c *electLeaderCmd) Result {
	switch {
	case !validNodeID(c.NewLeader):
		return invalid("elect leader %s/%d: bad new_leader %q", c.Topic, c.Partition, c.NewLeader)
	case !validElectReason(c.Reason):
		return invalid("elect leader %s/%d: unknown reason %q", c.Topic, c.Partition, c.Reason)
	}
	t, ok := x.topic(c.Topic)
	if !ok {
		return notFound("topic %q", c.Topic)
	}
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	unclean := c.Reason == ElectUnclean
	switch {
	case a.LeaderEpoch > 0 && a.LeaderEpoch-1 == c.ExpectedEpoch && a.Owner == c.NewLeader &&
		(!unclean || sameSet(a.InSync(), []string{c.NewLeader})):
		return Result{Outcome: OutcomeAlreadyDone, Assignment: a}
	case a.LeaderEpoch != c.ExpectedEpoch:
		return staleEpoch(a, c.ExpectedEpoch)
	case a.Target != "":
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "a move targets " + a.Target}
	case !slices.Contains(a.ReplicaSet(), c.NewLeader):
		return badReplicaSet(a, "%s is not a replica of %v", c.NewLeader, a.ReplicaSet())
	case unclean && !t.UncleanLeaderElection:
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "topic " + t.Name + " does not allow unclean leader election"}
	case !unclean && !slices.Contains(a.InSync(), c.NewLeader):
		return badReplicaSet(a, "%s is not in the isr %v", c.NewLeader, a.InSync())
	}
	isr := a.InSync()
	switch c.Reason {
	case ElectUnclean:
		isr = []string{c.NewLeader}
	case ElectDead:
		// The failed leader leaves the ISR with its leadership (as Kafka's controller does):
		// otherwise the new leader's HWM would wait for it until the shrink rule dropped it.
		// It comes back through the leader's expand once it has caught up.
		isr = slices.DeleteFunc(slices.Clone(isr), func(id string) bool { return id == a.Owner })
	}
	a.Owner, a.ISR = c.NewLeader, isr
	a.LeaderEpoch++
	a = x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

func validElectReason(r string) bool {
	switch r {
	case ElectDead, ElectShutdown, ElectPreferred, ElectUnclean, ElectReassign:
		return true
	}
	return false
}

// setReplicas is op 25, a reassignment step: replace the replica list of a replicated
// partition under epoch expected_epoch. The leader stays a replica (leadership moves first,
// by op 24), and the new ISR holds the leader and only members of both the new replicas and
// the current ISR: a replica enters the ISR only through the leader's op 23, once caught up.
// Single-replica topics (R = 1) move by ops 15–17 instead. The epoch does not change. A given
// target_replicas records a replica move (RF of the new replicas), or, equal to the new
// replicas, clears it; the stored one is cleared too once the replicas reach it or no longer
// hold it.
func (x *txn) setReplicas(c *setReplicasCmd) Result {
	switch {
	case !validNodeList(c.Replicas):
		return invalid("set replicas %s/%d: bad replicas", c.Topic, c.Partition)
	case !validNodeList(c.ISR):
		return invalid("set replicas %s/%d: bad isr", c.Topic, c.Partition)
	case c.TargetReplicas != nil && !validNodeList(c.TargetReplicas):
		return invalid("set replicas %s/%d: bad target replicas", c.Topic, c.Partition)
	}
	t, ok := x.topic(c.Topic)
	if !ok {
		return notFound("topic %q", c.Topic)
	}
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	switch {
	case a.LeaderEpoch == c.ExpectedEpoch && slices.Equal(a.ReplicaSet(), c.Replicas) && sameSet(a.InSync(), c.ISR) &&
		(c.TargetReplicas == nil || slices.Equal(a.MoveTarget(), c.TargetReplicas)):
		return Result{Outcome: OutcomeAlreadyDone, Assignment: a}
	case a.LeaderEpoch != c.ExpectedEpoch:
		return staleEpoch(a, c.ExpectedEpoch)
	case t.RF() == 1:
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "topic " + t.Name + " has replication factor 1: it moves by ops 15–17"}
	case a.Target != "":
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "a move targets " + a.Target}
	case !slices.Contains(c.Replicas, a.Owner):
		return badReplicaSet(a, "new replicas %v leave out the leader %s", c.Replicas, a.Owner)
	case !slices.Contains(c.ISR, a.Owner):
		return badReplicaSet(a, "new isr %v leaves out the leader %s", c.ISR, a.Owner)
	case !subset(c.ISR, c.Replicas):
		return badReplicaSet(a, "new isr %v is not within the new replicas %v", c.ISR, c.Replicas)
	case !subset(c.ISR, a.InSync()):
		return badReplicaSet(a, "new isr %v adds to the isr %v", c.ISR, a.InSync())
	case c.TargetReplicas != nil && !slices.Equal(c.TargetReplicas, c.Replicas) &&
		(len(c.TargetReplicas) != t.RF() || !subset(c.TargetReplicas, c.Replicas)):
		return badReplicaSet(a, "move target %v is neither %d of the new replicas %v nor them", c.TargetReplicas, t.RF(), c.Replicas)
	}
	if c.TargetReplicas != nil {
		a.TargetReplicas = slices.Clone(c.TargetReplicas)
	}
	a.Replicas = slices.Clone(c.Replicas)
	a.ISR = inReplicaOrder(a.Replicas, c.ISR)
	a = x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

func staleEpoch(a Assignment, named uint64) Result {
	return Result{Outcome: OutcomeStaleEpoch, Assignment: a,
		Reason: fmt.Sprintf("%s/%d: leader epoch is %d, not %d", a.Topic, a.Partition, a.LeaderEpoch, named)}
}

func badReplicaSet(a Assignment, format string, args ...any) Result {
	return Result{Outcome: OutcomeBadReplicaSet, Assignment: a,
		Reason: fmt.Sprintf("%s/%d: ", a.Topic, a.Partition) + fmt.Sprintf(format, args...)}
}
