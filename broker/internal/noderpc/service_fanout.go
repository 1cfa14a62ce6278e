package noderpc

import (
	"context"
	"encoding/json"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
)

// AttachChild (op 15): the leader records the attach point and proposes the link.
func (s *Service) AttachChild(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	var ar attachRequest
	if err := json.Unmarshal(req.RequestJson, &ar); err != nil || ar.Child == "" {
		return refusedTopicWrite(errcode.Sub("undecodable attach request", errcode.ErrInvalid)), nil
	}
	t, err := s.e.AttachChildAsLeader(ctx, req.Name, ar.Child, ar.DelayMs)
	return s.topicReply(t, err), nil
}

// DetachChild (op 16).
func (s *Service) DetachChild(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	var ar attachRequest
	if err := json.Unmarshal(req.RequestJson, &ar); err != nil || ar.Child == "" {
		return refusedTopicWrite(errcode.Sub("undecodable detach request", errcode.ErrInvalid)), nil
	}
	return s.topicReply(meta.Topic{}, s.e.DetachChildAsLeader(ctx, req.Name, ar.Child)), nil
}

// FanoutCursors (op 17): cursor positions of a parent partition this node owns, from the
// cursor files; never opens a log.
func (s *Service) FanoutCursors(ctx context.Context, req *nodepb.FanoutCursorsRequest) (*nodepb.FanoutCursorsReply, error) {
	t, err := s.ownedPartition(ctx, req.Parent, req.Partition)
	if err != nil {
		st, reason, msg := errcode.Data.Reply(err)
		return &nodepb.FanoutCursorsReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	r := s.e.LocalFanoutCursors(t, int(req.Partition))
	rep := &nodepb.FanoutCursorsReply{Status: 200, HighWatermark: r.HighWatermark, HwmKnown: r.HWMKnown}
	for _, c := range r.Cursors {
		rep.Cursors = append(rep.Cursors, &nodepb.FanoutCursor{Child: c.Child, Epoch: c.Epoch, NextOffset: c.NextOffset,
			Stalled: c.Stalled, DueLagSeconds: c.DueLagSeconds, RemoteState: c.RemoteState, LastError: c.LastError})
	}
	return rep, nil
}
