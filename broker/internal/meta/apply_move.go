package meta

// setAssignmentTarget is op 15: aim a partition at a new node. Set only when the owner is the
// expected one, the target differs from the owner, and no other target is set; the same
// target again is CASAlreadyDone. Clearing a target is op 17. Only a single-replica
// partition moves this way; one with more replicas moves by reassignment (op 25,
// docs/internals/replication.md §9).
func (x *txn) setAssignmentTarget(c *setTargetCmd) Result {
	if !validNodeID(c.Target) {
		return invalid("bad target %q", c.Target)
	}
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	switch {
	case a.Owner != c.ExpectedOwner:
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "owner is " + a.Owner}
	case c.Target == a.Owner:
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "target is the owner"}
	case a.Target == c.Target:
		return Result{Outcome: OutcomeAlreadyDone, Assignment: a}
	case a.Target != "":
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "another move targets " + a.Target}
	case len(a.ReplicaSet()) > 1:
		return Result{Outcome: OutcomeRefused, Assignment: a, Reason: "a replicated partition moves by reassignment"}
	}
	a.Target = c.Target
	x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

// completeMove is op 16, the ownership flip CAS (docs/internals/moves.md §5.10): owner already the
// target with no target set → CASAlreadyDone; owner == expected_owner and target == target →
// owner := target, target cleared (CASDone); anything else → refused with the current record.
// The flip is a leader change: it bumps the leader epoch, and the single replica (and ISR)
// follows the owner (docs/internals/replication.md §1).
func (x *txn) completeMove(c *completeMoveCmd) Result {
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	switch {
	case c.Target != "" && a.Owner == c.Target && a.Target == "":
		return Result{Outcome: OutcomeAlreadyDone, Assignment: a}
	case c.Target == "" || a.Owner != c.ExpectedOwner || a.Target != c.Target:
		return Result{Outcome: OutcomeRefused, Assignment: a,
			Reason: "owner " + a.Owner + ", target " + a.Target}
	}
	a.Owner, a.Target = a.Target, ""
	a.Replicas, a.ISR = nil, nil // op 15 sets a target on single-replica partitions only
	a.LeaderEpoch++
	a = x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

// abortMove is op 17: clear the target only if it is the expected one; otherwise nothing
// changes (CASNoop).
func (x *txn) abortMove(c *abortMoveCmd) Result {
	a, ok := x.assignment(c.Topic, c.Partition)
	if !ok {
		return notFound("assignment %s/%d", c.Topic, c.Partition)
	}
	if a.Target == "" || a.Target != c.ExpectedTarget {
		return Result{Outcome: OutcomeNoop, Assignment: a}
	}
	a.Target = ""
	x.putAssignment(a)
	x.assignmentEvent(a)
	return Result{Outcome: OutcomeOK, Assignment: a}
}

func (x *txn) assignmentEvent(a Assignment) {
	x.ev.Topic, x.ev.Partition, x.ev.Member = a.Topic, a.Partition, a.Owner
	if t, ok := x.topic(a.Topic); ok {
		x.ev.Incarnation = t.Incarnation
	}
}
