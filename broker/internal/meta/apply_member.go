package meta

import "slices"

// memberJoin is op 6: upsert a member with status alive. The stored draining flag survives
// re-registration (the command's Draining is ignored); the stopping flag does not (a node that
// registers again has restarted, docs/internals/replication.md §9). Routing-members bumps only when the
// member is new or its addresses, status or rack change — never for the heartbeat stamp alone.
func (x *txn) memberJoin(c *memberCmd) Result {
	m := c.Member
	if !validNodeID(m.ID) {
		return invalid("bad member id %q", m.ID)
	}
	cur, ok := x.member(m.ID)
	next := Member{ID: m.ID, Addr: m.Addr, ClusterAddr: m.ClusterAddr, Status: MemberAlive,
		LastHeartbeat: m.LastHeartbeat, Rack: m.Rack}
	if ok {
		next.Draining = cur.Draining
		if next.LastHeartbeat < cur.LastHeartbeat {
			next.LastHeartbeat = cur.LastHeartbeat
		}
	}
	if ok && next == cur {
		return okResult()
	}
	x.putMember(next)
	if !ok || cur.Addr != next.Addr || cur.ClusterAddr != next.ClusterAddr || cur.Status != next.Status ||
		cur.Rack != next.Rack {
		x.ch.members = true
	}
	x.ev.Member = m.ID
	return okResult()
}

// memberHeartbeat is op 7: stamp last_heartbeat (never backwards) and set the stopping flag to
// the command's (docs/internals/replication.md §9); a dead member becomes alive (which bumps
// routing-members; the stamp and the flag alone do not).
func (x *txn) memberHeartbeat(c *heartbeatCmd) Result {
	cur, ok := x.member(c.ID)
	if !ok {
		return notFound("member %q", c.ID)
	}
	next := cur
	next.LastHeartbeat = max(cur.LastHeartbeat, c.At)
	next.Status = MemberAlive
	next.Stopping = c.Stopping
	if next == cur {
		return okResult()
	}
	x.putMember(next)
	x.ch.members = cur.Status != next.Status
	x.ev.Member = c.ID
	return okResult()
}

// memberDead is op 8: status → dead (bumps routing-members when it changes).
func (x *txn) memberDead(c *memberIDCmd) Result {
	cur, ok := x.member(c.ID)
	if !ok {
		return notFound("member %q", c.ID)
	}
	if cur.Status == MemberDead {
		return okResult()
	}
	cur.Status = MemberDead
	x.putMember(cur)
	x.ch.members = true
	x.ev.Member = c.ID
	return okResult()
}

// setDraining is op 18: set or clear the decommission flag. It bumps no domain version
// (drain flags are not routing changes; docs/internals/metastore.md §8).
func (x *txn) setDraining(c *drainCmd) Result {
	cur, ok := x.member(c.ID)
	if !ok {
		return notFound("member %q", c.ID)
	}
	if cur.Draining == c.On {
		return okResult()
	}
	cur.Draining = c.On
	x.putMember(cur)
	x.ev.Member = c.ID
	return okResult()
}

// removeMember is op 19: delete a member record (garbage collection, docs/internals/metastore.md §11).
// Refused while the member still owns a partition, holds one of its replicas or is a move's
// target: its record is needed to route to, replicate from, or abort towards, that node.
func (x *txn) removeMember(c *memberIDCmd) Result {
	if _, ok := x.member(c.ID); !ok {
		return notFound("member %q", c.ID)
	}
	var busy *Assignment
	x.scan([]byte(prefixAssignment), func(k, v []byte) {
		if busy != nil {
			return
		}
		var a Assignment
		mustDecode(k, v, &a)
		if a.Owner == c.ID || a.Target == c.ID || slices.Contains(a.ReplicaSet(), c.ID) {
			busy = &a
		}
	})
	if busy != nil {
		return refused("member %q still owns or receives %s/%d", c.ID, busy.Topic, busy.Partition)
	}
	x.del(memberKey(c.ID))
	x.ch.members = true
	x.ch.wrote = true
	x.ev.Member = c.ID
	return okResult()
}
