package noderpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

// Op 36, ElectLeaders (docs/internals/node-rpc.md): an on-demand leader election, run by the
// Raft leader's controller for POST /v1/cluster/elect-leaders.

// LeaderElector runs a leader-election planner once (*controller.Controller).
type LeaderElector interface {
	ElectLeaders(ctx context.Context, req controller.ElectRequest) ([]controller.Election, error)
}

// ErrElectUnwired answers op 36 on a node built without a LeaderElector.
var ErrElectUnwired = errors.New("leader elections are not available on this node")

// ElectLeaders (op 36): served on the Raft leader only (421 + hint elsewhere). Errors map
// through the Leader plane (400, 404, 421; anything else 503, with the elections made
// before it).
func (s *Service) ElectLeaders(ctx context.Context, req *nodepb.ElectLeadersRequest) (*nodepb.ElectLeadersReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.ElectLeadersReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	es, err := RunElectLeaders(ctx, s.mv, ElectCall{Preferred: req.Preferred, Topic: req.Topic, Partition: int(req.Partition)})
	st, reason, msg := errcode.Leader.Reply(err)
	out := &nodepb.ElectLeadersReply{Status: st, Error: msg, Reason: string(reason)}
	if st == 421 {
		_, out.LeaderHint = s.store.Leader()
	}
	out.ElectionsJson, _ = json.Marshal(es) // plain fields: cannot fail
	return out, nil
}

// ElectCall is one on-demand election request, local or arriving as op 36. Partition < 0:
// every partition.
type ElectCall struct {
	Preferred bool
	Topic     string
	Partition int
}

// RunElectLeaders performs c with the leader's LeaderElector; it never answers nil
// elections. The caller has checked that this node leads.
func RunElectLeaders(ctx context.Context, d MoveDeps, c ElectCall) ([]controller.Election, error) {
	if d.Elector == nil {
		return []controller.Election{}, ErrElectUnwired
	}
	es, err := d.Elector.ElectLeaders(ctx, controller.ElectRequest{Preferred: c.Preferred, Topic: c.Topic, Partition: c.Partition})
	if es == nil {
		es = []controller.Election{}
	}
	return es, err
}

// ElectLeaders asks the leader at leaderAddr to perform c (op 36). It answers the elections
// that took effect and the leader's refusal through the Leader plane (errcode.ErrInvalid,
// ErrNotFound, ErrNotLeader for a leadership that moved, ErrNoLeader for anything else);
// a leader that could not be asked or answered undecodably is meta.ErrNoLeader.
func (p Peers) ElectLeaders(ctx context.Context, leaderAddr string, c ElectCall) ([]controller.Election, error) {
	cl, err := p.pool.Client(leaderAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, leaderAddr, err)
	}
	rep, err := cl.ElectLeaders(ctx, &nodepb.ElectLeadersRequest{Preferred: c.Preferred, Topic: c.Topic,
		Partition: int32(c.Partition)})
	if err != nil {
		return nil, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, leaderAddr, err)
	}
	var es []controller.Election
	if len(rep.ElectionsJson) > 0 {
		if err := json.Unmarshal(rep.ElectionsJson, &es); err != nil {
			return nil, fmt.Errorf("%w: undecodable elections from %s: %v", meta.ErrNoLeader, leaderAddr, err)
		}
	}
	return es, errcode.Leader.Error(rep.Status, rep.Reason, rep.Error)
}
