package noderpc

import (
	"context"
	"encoding/json"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

// AttachChild (op 15): the leader records the attach point and proposes the link.
func (s *Service) AttachChild(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, LeaderHint: hint}, nil
	}
	var ar attachRequest
	if err := json.Unmarshal(req.RequestJson, &ar); err != nil || ar.Child == "" {
		return &nodepb.TopicWriteReply{Status: 400, Error: "undecodable attach request"}, nil
	}
	t, err := s.e.AttachChildAsLeader(ctx, req.Name, ar.Child, ar.DelayMs)
	return s.topicReply(t, err), nil
}

// DetachChild (op 16).
func (s *Service) DetachChild(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, LeaderHint: hint}, nil
	}
	var ar attachRequest
	if err := json.Unmarshal(req.RequestJson, &ar); err != nil || ar.Child == "" {
		return &nodepb.TopicWriteReply{Status: 400, Error: "undecodable detach request"}, nil
	}
	return s.topicReply(meta.Topic{}, s.e.DetachChildAsLeader(ctx, req.Name, ar.Child)), nil
}

// FanoutCursors (op 17): cursor positions of a parent partition this node owns, from the
// cursor files; never opens a log.
func (s *Service) FanoutCursors(ctx context.Context, req *nodepb.FanoutCursorsRequest) (*nodepb.FanoutCursorsReply, error) {
	t, ok := s.e.TopicForPeer(ctx, req.Parent)
	if !ok {
		return &nodepb.FanoutCursorsReply{Status: 404, Error: "unknown topic"}, nil
	}
	if req.Partition < 0 || int(req.Partition) >= t.Partitions {
		return &nodepb.FanoutCursorsReply{Status: 400, Error: "partition out of range"}, nil
	}
	if a, ok := s.store.Assignment(t.Name, int(req.Partition)); !ok || a.Owner != s.store.NodeID() {
		return &nodepb.FanoutCursorsReply{Status: 421, Error: "not the owner"}, nil
	}
	r := s.e.LocalFanoutCursors(t, int(req.Partition))
	rep := &nodepb.FanoutCursorsReply{Status: 200, HighWatermark: r.HighWatermark, HwmKnown: r.HWMKnown}
	for _, c := range r.Cursors {
		rep.Cursors = append(rep.Cursors, &nodepb.FanoutCursor{Child: c.Child, Epoch: c.Epoch, NextOffset: c.NextOffset,
			Stalled: c.Stalled, DueLagSeconds: c.DueLagSeconds, RemoteState: c.RemoteState, LastError: c.LastError})
	}
	return rep, nil
}
