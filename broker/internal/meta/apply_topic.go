package meta

import (
	"bytes"
	"encoding/json"
	"slices"
)

// createTopic is op 1: insert the topic with its initial assignments, optional first schema
// version and optional attach as a child, all in one entry; fail if the name exists.
func (x *txn) createTopic(c *createTopicCmd) Result {
	t := c.Topic
	if r, ok := checkTopicFields(t); !ok {
		return r
	}
	if t.Incarnation == "" {
		return invalid("topic %q: missing incarnation", t.Name)
	}
	if _, ok := x.topic(t.Name); ok {
		return exists("topic %q exists", t.Name)
	}
	// The record starts standalone; links are only ever made by the attach rules below.
	t.Role, t.Children, t.Parent = RoleStandalone, nil, ""
	t.AttachEpoch, t.AttachOffsets, t.FanoutDelayMs, t.SchemaVersion = "", nil, 0, 0
	as, r, ok := checkNewAssignments(t, c.Assignments, nil)
	if !ok {
		return r
	}
	x.putTopic(t)
	for _, a := range as {
		x.putAssignment(a)
	}
	if len(c.Schema) > 0 {
		doc, ok := compactJSON(c.Schema)
		if !ok {
			return invalid("topic %q: schema is not JSON", t.Name)
		}
		x.writeSchema(Schema{Topic: t.Name, Version: 1, Doc: doc})
		t.SchemaVersion = 1
		x.putTopic(t)
	}
	x.topicDelta = 1
	x.ev.Topic, x.ev.Incarnation = t.Name, t.Incarnation
	if c.Attach != nil {
		parent, ok := x.topic(c.Attach.Parent)
		if !ok {
			return notFound("parent topic %q", c.Attach.Parent)
		}
		_, child, r := x.link(parent, t, *c.Attach)
		if !success(r.Outcome) {
			return r
		}
		t = child
		x.ev.Parent = parent.Name
	}
	return Result{Outcome: OutcomeOK, Topic: t, Version: t.SchemaVersion}
}

// checkNewAssignments validates initial placements of t: partition in range, owner set, no
// target, no duplicate, and (for a partition increase) only partitions ≥ from that are not
// assigned yet (assigned reports an existing assignment); then the replica set
// (checkNewReplicaSet). It returns the assignments in their stored form.
func checkNewAssignments(t Topic, as []Assignment, assigned func(p int) bool) ([]Assignment, Result, bool) {
	seen := map[int]bool{}
	out := make([]Assignment, 0, len(as))
	for _, a := range as {
		if a.Topic == "" {
			a.Topic = t.Name
		}
		if a.Owner == "" && len(a.Replicas) > 0 {
			a.Owner = a.Replicas[0] // a new partition starts on its preferred leader
		}
		switch {
		case a.Topic != t.Name:
			return nil, invalid("assignment for %q in a command for %q", a.Topic, t.Name), false
		case a.Partition < 0 || a.Partition >= t.Partitions:
			return nil, invalid("topic %q: partition %d out of range", t.Name, a.Partition), false
		case !validNodeID(a.Owner):
			return nil, invalid("topic %q partition %d: bad owner", t.Name, a.Partition), false
		case a.Target != "":
			return nil, invalid("topic %q partition %d: a new assignment has no target", t.Name, a.Partition), false
		case seen[a.Partition]:
			return nil, invalid("topic %q: partition %d assigned twice", t.Name, a.Partition), false
		case assigned != nil && assigned(a.Partition):
			return nil, exists("topic %q partition %d is already assigned", t.Name, a.Partition), false
		}
		if r, ok := checkNewReplicaSet(t, &a); !ok {
			return nil, r, false
		}
		seen[a.Partition] = true
		out = append(out, canonical(a))
	}
	return out, Result{}, true
}

// checkNewReplicaSet is the replica rule of a new assignment (docs/internals/replication.md
// §1): exactly R distinct replicas holding the owner, epoch 0, and an ISR (all the
// replicas when omitted: every copy starts empty) that holds the owner and only replicas.
// An assignment without replicas is the single-replica form, valid for R = 1 only.
func checkNewReplicaSet(t Topic, a *Assignment) (Result, bool) {
	reps := a.ReplicaSet()
	if len(a.ISR) == 0 {
		a.ISR = reps
	}
	switch {
	case a.LeaderEpoch != 0:
		return invalid("topic %q partition %d: a new assignment starts at leader epoch 0", t.Name, a.Partition), false
	case len(a.TargetReplicas) > 0:
		return invalid("topic %q partition %d: a new assignment has no replica move", t.Name, a.Partition), false
	case len(reps) != t.RF():
		return invalid("topic %q partition %d: %d replicas, replication factor %d", t.Name, a.Partition, len(reps), t.RF()), false
	case !validNodeList(reps) || !validNodeList(a.ISR):
		return invalid("topic %q partition %d: bad replica list", t.Name, a.Partition), false
	case !slices.Contains(reps, a.Owner):
		return invalid("topic %q partition %d: owner %s is not a replica", t.Name, a.Partition, a.Owner), false
	case !slices.Contains(a.ISR, a.Owner) || !subset(a.ISR, reps):
		return invalid("topic %q partition %d: isr must hold the owner and only replicas", t.Name, a.Partition), false
	}
	return Result{}, true
}

// updateTopic is op 2: replace the mutable fields (partitions: increase only; retention; the
// three consumer limits) atomically, optionally with a new schema version and placements of
// new partitions. Identity, link and schema-reference fields are never taken from the command.
func (x *txn) updateTopic(c *updateTopicCmd) Result {
	n := c.Topic
	cur, ok := x.topic(n.Name)
	if !ok {
		return notFound("topic %q", n.Name)
	}
	if n.Incarnation != "" && n.Incarnation != cur.Incarnation {
		return notFound("topic %q incarnation %s", n.Name, n.Incarnation)
	}
	if r, ok := checkTopicFields(n); !ok {
		return r
	}
	if n.Partitions < cur.Partitions {
		return invalid("topic %q: partitions may only increase (%d → %d)", n.Name, cur.Partitions, n.Partitions)
	}
	for _, name := range cur.Children {
		if ch, ok := x.topic(name); ok && !retentionCoversDelay(n.RetentionMs, ch.FanoutDelayMs) {
			return refused("topic %q: retention_ms %d below delay child %q's delay + 1 h", n.Name, n.RetentionMs, name)
		}
	}
	for _, ref := range cur.RemoteLinks {
		var l RemoteLink
		if x.get(remoteKey(cur.Name, ref.ID), &l) && !retentionCoversDelay(n.RetentionMs, l.DelayMs) {
			return refused("topic %q: retention_ms %d below remote child %s's delay + 1 h", n.Name, n.RetentionMs, ref.ID)
		}
	}
	if len(c.Schema) > 0 && cur.Parent != "" {
		return refused("topic %q: the schema of an attached child is managed by its parent", n.Name)
	}
	next := cur
	next.Partitions = n.Partitions
	next.RetentionMs = n.RetentionMs
	next.VisibilityTimeoutMs = n.VisibilityTimeoutMs
	next.MaxInFlightPerPartition = n.MaxInFlightPerPartition
	next.MaxAckedAheadPerPartition = n.MaxAckedAheadPerPartition
	if c.Replication {
		if r, ok := setReplication(&next, n); !ok {
			return r
		}
	}
	as, r, ok := checkNewAssignments(next, c.Assignments, func(p int) bool {
		_, ok := x.assignment(next.Name, p)
		return ok || p < cur.Partitions
	})
	if !ok {
		return r
	}
	x.putTopic(next)
	for _, a := range as {
		x.putAssignment(a)
	}
	x.ev.Topic, x.ev.Incarnation = next.Name, next.Incarnation
	if len(c.Schema) > 0 {
		r := x.putSchema(&putSchemaCmd{Topic: next.Name, Doc: c.Schema})
		if !success(r.Outcome) {
			return r
		}
		next, _ = x.topic(next.Name)
	}
	return Result{Outcome: OutcomeOK, Topic: next, Version: next.SchemaVersion}
}

// setReplication takes n's replication settings into next (op 2 with replication set,
// docs/internals/replication.md §9): R 1 is stored as 0; R may change only between 2 and 5
// (a single-replica topic writes through the ingress WAL, a replicated one does not), and M
// must stay within 1 … R. The replica sets follow R through the controller's reassignment.
func setReplication(next *Topic, n Topic) (Result, bool) {
	rf := n.ReplicationFactor
	if rf == 1 {
		rf = 0
	}
	if (next.RF() == 1) != (n.RF() == 1) {
		return refused("topic %q: replication_factor cannot change between 1 and %d (1 ↔ ≥ 2)", n.Name, n.RF()), false
	}
	next.ReplicationFactor, next.MinInsyncReplicas, next.UncleanLeaderElection = rf, n.MinInsyncReplicas, n.UncleanLeaderElection
	return checkTopicFields(*next)
}

// deleteTopic is op 3: remove the topic, its assignments, schemas and remote links; a
// parent's children become standalone (keeping data and schemas); a child is unlinked from
// its parent. The result carries the deleted record.
func (x *txn) deleteTopic(c *deleteTopicCmd) Result {
	t, ok := x.topic(c.Name)
	if !ok {
		return notFound("topic %q", c.Name)
	}
	if c.Incarnation != "" && c.Incarnation != t.Incarnation {
		return notFound("topic %q incarnation %s", c.Name, c.Incarnation)
	}
	x.del(topicKey(t.Name))
	x.delPrefix(assignmentPrefix(t.Name))
	x.delPrefix(schemaPrefix(t.Name))
	x.delPrefix(remotePrefix(t.Name))
	x.ch.topics[t.Name] = struct{}{}
	x.ch.assignments[t.Name] = struct{}{}
	x.ch.schemas[t.Name] = struct{}{}
	x.ch.wrote = true
	x.topicDelta = -1
	for _, name := range t.Children {
		if ch, ok := x.topic(name); ok && ch.Parent == t.Name {
			x.putTopic(unlinked(ch))
		}
	}
	if t.Parent != "" {
		if p, ok := x.topic(t.Parent); ok {
			x.putTopic(withoutChild(p, t.Name))
		}
	}
	x.ev.Topic, x.ev.Incarnation, x.ev.Parent = t.Name, t.Incarnation, t.Parent
	return Result{Outcome: OutcomeOK, Topic: t}
}

// putSchema is op 4: add the next schema version to a topic that is not an attached child,
// and the same version to each of its children (their history mirrors the parent's). A doc
// equal to the latest version adds nothing (a retried proposal is idempotent). The additive
// compatibility rule (docs/internals/http-api.md §2.5) is checked by the proposer, which holds the compiler.
func (x *txn) putSchema(c *putSchemaCmd) Result {
	t, ok := x.topic(c.Topic)
	if !ok {
		return notFound("topic %q", c.Topic)
	}
	if t.Parent != "" {
		return refused("topic %q: the schema of an attached child is managed by its parent", t.Name)
	}
	doc, ok := compactJSON(c.Doc)
	if !ok {
		return invalid("topic %q: schema is not JSON", t.Name)
	}
	hist := x.schemas(t.Name)
	var v uint32 = 1
	if len(hist) > 0 {
		last := hist[len(hist)-1]
		if bytes.Equal(last.Doc, doc) {
			return Result{Outcome: OutcomeOK, Topic: t, Version: last.Version}
		}
		v = last.Version + 1
	}
	x.writeSchema(Schema{Topic: t.Name, Version: v, Doc: doc})
	t.SchemaVersion = v
	x.putTopic(t)
	for _, name := range t.Children {
		ch, ok := x.topic(name)
		if !ok || ch.Parent != t.Name {
			continue
		}
		x.writeSchema(Schema{Topic: ch.Name, Version: v, Doc: doc})
		ch.SchemaVersion = v
		x.putTopic(ch)
	}
	x.ev.Topic, x.ev.Incarnation = t.Name, t.Incarnation
	return Result{Outcome: OutcomeOK, Topic: t, Version: v}
}

// assignPartition is op 5: set the owner of an unassigned partition. Re-assigning the same
// owner is an idempotent success; another owner is refused (assignments are sticky).
func (x *txn) assignPartition(c *assignCmd) Result {
	a := c.Assignment
	t, ok := x.topic(a.Topic)
	if !ok {
		return notFound("topic %q", a.Topic)
	}
	as, r, ok := checkNewAssignments(t, []Assignment{a}, nil)
	if !ok {
		return r
	}
	a = as[0]
	if cur, ok := x.assignment(a.Topic, a.Partition); ok {
		if cur.Owner == a.Owner {
			return Result{Outcome: OutcomeOK, Assignment: cur}
		}
		return Result{Outcome: OutcomeExists, Assignment: cur,
			Reason: "partition already assigned to " + cur.Owner}
	}
	x.putAssignment(a)
	x.ev.Topic, x.ev.Incarnation, x.ev.Partition, x.ev.Member = t.Name, t.Incarnation, a.Partition, a.Owner
	return Result{Outcome: OutcomeOK, Assignment: a}
}

// unlinked returns a child turned standalone (link fields cleared).
func unlinked(ch Topic) Topic {
	ch.Role, ch.Parent, ch.AttachEpoch, ch.AttachOffsets, ch.FanoutDelayMs = RoleStandalone, "", "", nil, 0
	return ch
}

// withoutChild removes child from p's children; a parent left with none becomes standalone.
func withoutChild(p Topic, child string) Topic {
	p.Children = slices.DeleteFunc(slices.Clone(p.Children), func(n string) bool { return n == child })
	if len(p.Children) == 0 {
		p.Children = nil
		p.Role = RoleStandalone
	}
	return p
}

// compactJSON validates doc and returns its compact form (the stored, compared form).
func compactJSON(doc json.RawMessage) (json.RawMessage, bool) {
	if !json.Valid(doc) {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}
