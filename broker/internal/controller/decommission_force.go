package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// ErrBadForce: a forced decommission refused as asked (409, a kind of ErrRefused, with no
// reasons): the member is not dead, or the lose list names a partition that is not a
// single-replica partition the member owns. Nothing changed.
var ErrBadForce = errcode.Sub("forced decommission refused", errcode.ErrRefused)

// EventDecommissionForce is the audit event of each partition a forced decommission gives up.
const EventDecommissionForce = "cluster.decommission.force"

// maxListed caps the partitions named in one error message.
const maxListed = 10

// PartitionRef names one partition of a topic.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
}

func (r PartitionRef) String() string { return fmt.Sprintf("%s/%d", r.Topic, r.Partition) }

func comparePartitions(a, b PartitionRef) int {
	return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// LostPartition is one single-replica partition a forced decommission gave up. Every record
// the dead owner held is lost: the metastore records no offset of a partition (its HWM lives
// only in the owner's log), so the range is "every offset below the dead owner's HWM",
// unknown here. NewOwner starts the partition's log empty at offset 0
// (docs/internals/replication.md §9).
type LostPartition struct {
	Topic       string `json:"topic"`
	Partition   int    `json:"partition"`
	Owner       string `json:"owner"`        // the dead node that held it
	NewOwner    string `json:"new_owner"`    // the live node that owns it, empty, from now on
	LeaderEpoch uint64 `json:"leader_epoch"` // the assignment's epoch after the flip
	RestartsAt  int64  `json:"restarts_at"`  // the new owner's first offset: always 0
}

// DecommissionForce is a decommission of a DEAD member id that accepts the loss of the
// single-replica partitions it owns (POST …/decommission with force, docs/internals/http-api.md
// §2.17). On the leader, after a barrier, under the placement lock, in order:
//
//  1. unknown id → meta.ErrNotFound; id not dead → ErrBadForce (409);
//  2. lose names a partition that is not a single-replica partition owned by id → ErrBadForce;
//  3. lose leaves out one of them → ErrRefused (409, dead_owner) with Verdict.Missing = exactly
//     those; nothing changed;
//  4. the up-front verdict with those partitions counted as given up: any reason left
//     (voter guards, no_receivers, a replicated partition without another alive ISR member)
//     → ErrRefused with the reasons; nothing changed;
//  5. each partition, in topic/partition order, goes to the alive, not draining node with the
//     fewest leaderships (then replicas, then ID): a target left from a move is cleared (op 17),
//     then op 15 sets the new node as target and op 16 flips the owner to it (CAS on the dead
//     owner, epoch bumped). Logged at error level and audited (EventDecommissionForce) each.
//     A CAS that does not hold → ErrRefused with Verdict.Lost = the partitions given up so far;
//  6. the drain flag is set (op 18); C6 removes the member once its replicated partitions are
//     rebuilt elsewhere.
//
// The returned Verdict lists in Lost exactly the partitions given up.
func (c *Controller) DecommissionForce(ctx context.Context, id string, lose []PartitionRef) (Verdict, error) {
	none := Verdict{Node: id, Reasons: []string{}}
	if err := c.leaderBarrier(ctx, "forced decommission"); err != nil {
		return none, err
	}
	c.placement.Lock()
	defer c.placement.Unlock()
	m, ok := c.store.Member(id)
	if !ok {
		return none, fmt.Errorf("%w: member %q", meta.ErrNotFound, id)
	}
	if m.Status != meta.MemberDead {
		return none, fmt.Errorf("%w: member %s is %s: force applies only to a dead member", ErrBadForce, id, m.Status)
	}
	all := c.store.AllAssignments()
	owned := soleOwned(all, id)
	missing, extra := compareLose(owned, lose)
	if len(extra) > 0 {
		return none, fmt.Errorf("%w: not single-replica partitions of %s: %s", ErrBadForce, id, listRefs(extra))
	}
	v, err := c.readView()
	if err != nil {
		return none, err
	}
	if len(missing) > 0 {
		verdict := v.verdict(id)
		verdict.Missing = missing
		return verdict, fmt.Errorf("%w: %s: %s; force must name every single-replica partition it owns, missing %s",
			ErrRefused, id, strings.Join(verdict.Reasons, ", "), listRefs(missing))
	}
	v.stranded[id] -= len(owned)
	verdict := v.verdict(id)
	if !verdict.Allowed {
		return verdict, fmt.Errorf("%w: %s: %s", ErrRefused, id, strings.Join(verdict.Reasons, ", "))
	}
	verdict.Lost = []LostPartition{}
	picks := newOwnerPicker(c.store.Members(), all, id)
	for _, a := range owned {
		lost, err := c.giveUp(ctx, a, picks.next())
		if err != nil {
			return verdict, err
		}
		verdict.Lost = append(verdict.Lost, lost)
	}
	if !m.Draining {
		if err := c.store.SetMemberDraining(meta.LeaderOnly(ctx), id, true); err != nil {
			return verdict, err
		}
	}
	c.logger.Info("forced decommission started", "member", id, "partitions_lost", len(verdict.Lost))
	return verdict, nil
}

// giveUp hands a's partition, owned by a dead node, to the live node to as a new empty owner:
// a leftover target is cleared, then op 15 and op 16 CAS on the dead owner.
func (c *Controller) giveUp(ctx context.Context, a meta.Assignment, to string) (LostPartition, error) {
	ref := PartitionRef{Topic: a.Topic, Partition: a.Partition}
	if to == "" {
		return LostPartition{}, fmt.Errorf("%w: %s: %s", ErrRefused, ref, ReasonNoReceivers)
	}
	if a.Target != "" && a.Target != to {
		if _, _, err := c.store.AbortMove(meta.LeaderOnly(ctx), a.Topic, a.Partition, a.Target); err != nil {
			return LostPartition{}, err
		}
	}
	res, cur, err := c.store.SetAssignmentTarget(meta.LeaderOnly(ctx), a.Topic, a.Partition, to, a.Owner)
	if err == nil && res != meta.CASDone && res != meta.CASAlreadyDone {
		err = fmt.Errorf("%w: %s changed meanwhile (owner %s, target %s)", ErrRefused, ref, cur.Owner, cur.Target)
	}
	if err == nil {
		res, cur, err = c.store.CompleteMove(meta.LeaderOnly(ctx), a.Topic, a.Partition, a.Owner, to)
		if err == nil && res != meta.CASDone && res != meta.CASAlreadyDone {
			err = fmt.Errorf("%w: %s changed meanwhile (owner %s, target %s)", ErrRefused, ref, cur.Owner, cur.Target)
		}
	}
	target := ref.String()
	if err != nil {
		c.audit(ctx, EventDecommissionForce, target, err, "topic", a.Topic, "partition", a.Partition,
			"owner", a.Owner, "new_owner", to)
		return LostPartition{}, err
	}
	c.logger.Error("forced decommission: partition given up; every record its dead owner held is lost",
		"topic", a.Topic, "partition", a.Partition, "owner", a.Owner, "new_owner", to, "epoch", cur.LeaderEpoch)
	c.audit(ctx, EventDecommissionForce, target, nil, "topic", a.Topic, "partition", a.Partition,
		"owner", a.Owner, "new_owner", to, "leader_epoch", cur.LeaderEpoch)
	return LostPartition{Topic: a.Topic, Partition: a.Partition, Owner: a.Owner, NewOwner: to,
		LeaderEpoch: cur.LeaderEpoch}, nil
}

// soleOwned returns the single-replica assignments owned by id, in topic/partition order.
func soleOwned(all []meta.Assignment, id string) []meta.Assignment {
	var out []meta.Assignment
	for _, a := range all {
		if len(a.ReplicaSet()) < 2 && a.Owner == id {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y meta.Assignment) int {
		return comparePartitions(PartitionRef{x.Topic, x.Partition}, PartitionRef{y.Topic, y.Partition})
	})
	return out
}

// compareLose returns the partitions of owned that lose leaves out and the entries of lose
// (deduplicated) that owned does not hold, each sorted.
func compareLose(owned []meta.Assignment, lose []PartitionRef) (missing, extra []PartitionRef) {
	named := make(map[PartitionRef]bool, len(lose))
	for _, r := range lose {
		named[r] = true
	}
	for _, a := range owned {
		r := PartitionRef{Topic: a.Topic, Partition: a.Partition}
		if !named[r] {
			missing = append(missing, r)
		}
		delete(named, r)
	}
	for r := range named {
		extra = append(extra, r)
	}
	slices.SortFunc(extra, comparePartitions)
	return missing, extra
}

// listRefs names at most maxListed partitions, then how many more.
func listRefs(rs []PartitionRef) string {
	var b strings.Builder
	for i, r := range rs {
		if i == maxListed {
			fmt.Fprintf(&b, " and %d more", len(rs)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// ownerPicker chooses the new owners of a forced decommission: the alive, not draining nodes
// other than the dead one, fewest leaderships first (counting its own picks), then fewest
// replicas, then ID.
type ownerPicker struct {
	nodes []placement.Node
	load  map[string]placement.Load
}

func newOwnerPicker(members []meta.Member, all []meta.Assignment, dead string) *ownerPicker {
	nodes := slices.DeleteFunc(placement.Nodes(members), func(n placement.Node) bool { return n.ID == dead })
	return &ownerPicker{nodes: nodes, load: placement.LoadOf(all)}
}

// next returns the next new owner, "" when no node can take one.
func (p *ownerPicker) next() string {
	best := ""
	for _, n := range p.nodes {
		if best == "" || p.better(n.ID, best) {
			best = n.ID
		}
	}
	if best != "" {
		l := p.load[best]
		l.Leaders++
		l.Replicas++
		p.load[best] = l
	}
	return best
}

func (p *ownerPicker) better(a, b string) bool {
	la, lb := p.load[a], p.load[b]
	return cmp.Or(cmp.Compare(la.Leaders, lb.Leaders), cmp.Compare(la.Replicas, lb.Replicas), strings.Compare(a, b)) < 0
}
