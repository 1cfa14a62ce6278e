package server

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/transfer"
)

// Bounds of the cluster endpoints.
const (
	moveDetailTimeout  = 2 * time.Second  // every op 30 of one GET /v1/cluster/moves?detail=true
	moveDetailParallel = 16               // op 30 calls in flight at once
	clusterWriteWait   = 15 * time.Second // an abort's CAS + leader read back; a decommission
)

// clusterStore is the metastore surface the cluster service reads and proposes through,
// implemented by *meta.Store (proposals on a follower forward to the leader by themselves).
type clusterStore interface {
	NodeID() string
	IsLeader() bool
	Leader() (id, addr string)
	Members() []meta.Member
	RaftRole(id string) string
	Topic(name string) (meta.Topic, bool)
	Assignment(topic string, partition int) (meta.Assignment, bool)
	AllAssignments() []meta.Assignment
	AbortMove(ctx context.Context, topic string, p int, expectedTarget string) (meta.CASResult, meta.Assignment, error)
	ConfirmAssignment(ctx context.Context, topic string, partition int) (meta.Assignment, bool, error)
}

// clusterPeers is the node RPC the cluster service uses, implemented by peers.
type clusterPeers interface {
	NodeStatus(ctx context.Context, addr string) (*nodepb.NodeStatusReply, error)
	DecommissionMember(ctx context.Context, leaderAddr string, c noderpc.DecomCall) (noderpc.DecomResult, error)
	MoveReport(ctx context.Context, addr, topic string, partition int) (transfer.Report, error)
	ElectLeaders(ctx context.Context, leaderAddr string, c noderpc.ElectCall) ([]controller.Election, error)
}

var (
	_ clusterStore       = (*meta.Store)(nil)
	_ clusterPeers       = noderpc.Peers{}
	_ api.ClusterBackend = (*clusterService)(nil)
)

// clusterService is the api.ClusterBackend of the /v1/cluster endpoints (docs/internals/http-api.md §2.16–§2.19). Reads come from this node's replica; writes go to the leader (proposals
// forward; decommission is op 25).
type clusterService struct {
	store clusterStore
	peers clusterPeers
	mv    noderpc.MoveDeps
}

// errNoSuchPartition answers a topic or partition that does not exist (404).
var errNoSuchPartition = &api.ClusterError{Kind: api.ErrNotFound, Msg: "no such topic or partition"}

// Moves lists, from this node's replica, every assignment with a target or a replica move
// target, sorted by topic then partition; with detail, each single-replica move's
// destination's report.
func (c *clusterService) Moves(ctx context.Context, detail bool) []api.Move {
	members := map[string]meta.Member{}
	for _, m := range c.store.Members() {
		members[m.ID] = m
	}
	statusOf := func(id string) string {
		if m, ok := members[id]; ok {
			return memberStatus(m)
		}
		return api.MemberNotMember
	}
	out := []api.Move{}
	for _, a := range c.store.AllAssignments() {
		if len(a.MoveTarget()) > 0 {
			out = append(out, replicaMove(a, statusOf))
			continue
		}
		if a.Target == "" {
			continue
		}
		mv := api.Move{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: a.Target,
			FromStatus: statusOf(a.Owner), ToStatus: statusOf(a.Target), Blocked: []string{}}
		if mv.FromStatus == api.MemberDead || mv.FromStatus == api.MemberNotMember {
			mv.Blocked = append(mv.Blocked, api.BlockedSourceDead)
		}
		switch mv.ToStatus {
		case api.MemberDead:
			mv.Blocked = append(mv.Blocked, api.BlockedTargetDead)
		case api.MemberNotMember:
			mv.Blocked = append(mv.Blocked, api.BlockedTargetNotMember)
		}
		out = append(out, mv)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	if detail {
		c.addDetails(ctx, out, members)
	}
	return out
}

// replicaMove lists a replica move in flight (docs/internals/replication.md §9): From is the
// replica outside the target (the one that leaves), To the last replica (op 25 appends the
// joining one). It is blocked only by its destination: a source that is dead still leaves.
func replicaMove(a meta.Assignment, statusOf func(string) string) api.Move {
	target := a.MoveTarget()
	reps := a.ReplicaSet()
	mv := api.Move{Topic: a.Topic, Partition: a.Partition, To: reps[len(reps)-1], Blocked: []string{},
		Replicas: slices.Clone(reps), ISR: slices.Clone(a.InSync()), TargetReplicas: slices.Clone(target)}
	for _, id := range reps {
		if !slices.Contains(target, id) {
			mv.From = id
			break
		}
	}
	mv.FromStatus, mv.ToStatus = statusOf(mv.From), statusOf(mv.To)
	switch mv.ToStatus {
	case api.MemberDead:
		mv.Blocked = append(mv.Blocked, api.BlockedTargetDead)
	case api.MemberNotMember:
		mv.Blocked = append(mv.Blocked, api.BlockedTargetNotMember)
	}
	return mv
}

// addDetails asks each move's destination for its report (op 30), moveDetailParallel at once
// and all within moveDetailTimeout; a destination that cannot be asked sets detail_error.
func (c *clusterService) addDetails(ctx context.Context, out []api.Move, members map[string]meta.Member) {
	ctx, cancel := context.WithTimeout(ctx, moveDetailTimeout)
	defer cancel()
	sem := make(chan struct{}, moveDetailParallel)
	var wg sync.WaitGroup
	for i := range out {
		mv := &out[i]
		if len(mv.TargetReplicas) > 0 {
			mv.DetailError = "a replica move has no copy report: its destination has caught up once it is in the isr"
			continue
		}
		if mv.To == c.store.NodeID() {
			c.localDetail(mv)
			continue
		}
		m, ok := members[mv.To]
		if !ok || m.ClusterAddr == "" {
			mv.DetailError = "the destination is not a member"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				mv.DetailError = "the destination could not be asked in time"
				return
			}
			rep, err := c.peers.MoveReport(ctx, m.ClusterAddr, mv.Topic, mv.Partition)
			switch {
			case errors.Is(err, api.ErrNotFound):
				mv.DetailError = "the destination runs no worker for this move"
			case err != nil:
				mv.DetailError = err.Error()
			default:
				mv.Detail = &rep
			}
		}()
	}
	wg.Wait()
}

// localDetail fills the detail of a move this node is the destination of.
func (c *clusterService) localDetail(mv *api.Move) {
	if c.mv.Reporter == nil {
		mv.DetailError = noderpc.ErrMoveUnwired.Error()
		return
	}
	rep, ok := c.mv.Reporter.Report(mv.Topic, mv.Partition)
	if !ok {
		mv.DetailError = "the destination runs no worker for this move"
		return
	}
	mv.Detail = &rep
}

// AbortMove runs the algorithm of docs/internals/http-api.md §2.19: read, CAS-clear the target read, read
// back from the leader; done only if the owner is unchanged and the move to that target is
// gone. want is the target the caller expects ("" = whichever).
func (c *clusterService) AbortMove(ctx context.Context, topic string, part int, want string) (api.AbortedMove, error) {
	// 1. Read the assignment from this node's replica.
	t, ok := c.store.Topic(topic)
	if !ok || part >= t.Partitions {
		return api.AbortedMove{}, errNoSuchPartition
	}
	a, ok := c.store.Assignment(topic, part)
	if !ok {
		return api.AbortedMove{}, errNoSuchPartition
	}
	owner, target := a.Owner, a.Target
	if target == "" {
		return api.AbortedMove{}, moveConflict("no move in flight", owner, "")
	}
	if want != "" && want != target {
		return api.AbortedMove{}, moveConflict("the move targets another node", owner, target)
	}
	ctx, cancel := context.WithTimeout(ctx, clusterWriteWait)
	defer cancel()
	unknown := func(step string, err error) error {
		return &api.AbortUnknownError{Step: step, Owner: owner, Target: target, Err: err}
	}

	// 2. Compare-and-set: clear the target only if it still names the target read.
	res, _, err := c.store.AbortMove(ctx, topic, part, target)
	switch {
	case res == meta.CASNotFound:
		return api.AbortedMove{}, errNoSuchPartition
	case res == 0:
		if err == nil {
			err = errors.New("no verdict")
		}
		return api.AbortedMove{}, unknown("propose", err)
	}

	// 3. Read back from the leader: the CAS was a no-op if the leader's state had moved on.
	la, found, err := c.store.ConfirmAssignment(ctx, topic, part)
	if err != nil {
		return api.AbortedMove{}, unknown("leader read back", err)
	}
	if !found {
		return api.AbortedMove{}, errNoSuchPartition
	}

	// 4. Owner unchanged and no move to the target any more: the abort took effect.
	if la.Owner == owner && la.Target != target {
		return api.AbortedMove{Topic: topic, Partition: part, Owner: owner, Target: target}, nil
	}
	// 5. Otherwise the leader's owner and target.
	msg := "the move still targets " + la.Target
	if la.Owner != owner {
		msg = "the partition's owner changed to " + la.Owner + " (the move completed first)"
	}
	return api.AbortedMove{}, moveConflict(msg, la.Owner, la.Target)
}

// moveConflict is a 409 whose body names the partition's owner and target.
func moveConflict(msg, owner, target string) error {
	return &api.ClusterError{Kind: api.ErrConflict, Msg: msg, Fields: map[string]any{"owner": owner, "target": target}}
}
