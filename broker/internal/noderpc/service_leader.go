package noderpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/grpc"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/service"
)

// noticeKeepAlive is how often an idle WatchCommits stream sends an empty notice, so a watcher
// notices a dead stream (and re-opens it) within seconds.
const noticeKeepAlive = 5 * time.Second

// notLeader answers errcode.ErrNotLeader (421) with the leader this node knows.
func (s *Service) notLeader() (st int32, reason, msg, hint string) {
	_, hint = s.store.Leader()
	st, r, msg := errcode.Leader.Reply(errcode.ErrNotLeader)
	return st, string(r), msg, hint
}

// refusedTopicWrite answers a topic write the service refuses before the engine sees it.
func refusedTopicWrite(err error) *nodepb.TopicWriteReply {
	st, reason, msg := errcode.Leader.Reply(err)
	return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: string(reason)}
}

func (s *Service) topicReply(t meta.Topic, err error) *nodepb.TopicWriteReply {
	st, reason, msg := errcode.Leader.Reply(err)
	rep := &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: string(reason), AppliedIndex: s.store.AppliedIndex()}
	if errors.Is(err, errcode.ErrNotLeader) {
		_, rep.LeaderHint = s.store.Leader()
	}
	if err == nil && t.Name != "" {
		if b, jerr := json.Marshal(t); jerr == nil {
			rep.TopicJson = b
		}
	}
	return rep
}

// CreateTopic (op 4): the leader validates, places and proposes a create forwarded by a
// follower.
func (s *Service) CreateTopic(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	var cr service.CreateTopicRequest
	if err := json.Unmarshal(req.RequestJson, &cr); err != nil {
		return refusedTopicWrite(errcode.Sub("undecodable create request: "+err.Error(), errcode.ErrInvalid)), nil
	}
	cr.Schema = nullAsAbsent(cr.Schema)
	t, err := s.e.CreateTopicAsLeader(ctx, cr)
	return s.topicReply(t, err), nil
}

// AlterTopic (op 5).
func (s *Service) AlterTopic(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	var ar service.AlterTopicRequest
	if err := json.Unmarshal(req.RequestJson, &ar); err != nil {
		return refusedTopicWrite(errcode.Sub("undecodable alter request: "+err.Error(), errcode.ErrInvalid)), nil
	}
	ar.Schema = nullAsAbsent(ar.Schema)
	t, err := s.e.AlterTopicAsLeader(ctx, req.Name, ar)
	return s.topicReply(t, err), nil
}

// DeleteTopic (op 6).
func (s *Service) DeleteTopic(ctx context.Context, req *nodepb.TopicWriteRequest) (*nodepb.TopicWriteReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.TopicWriteReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	return s.topicReply(meta.Topic{}, s.e.DeleteTopicAsLeader(ctx, req.Name)), nil
}

// GetAssignment (op 28): a leader read behind a barrier issued after the request arrived.
func (s *Service) GetAssignment(ctx context.Context, req *nodepb.GetAssignmentRequest) (*nodepb.GetAssignmentReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.GetAssignmentReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	a, found, term, err := s.store.LeaderReadAssignment(ctx, req.Topic, int(req.Partition))
	if err != nil {
		st, reason, msg := errcode.LeaderRead.Reply(err)
		return &nodepb.GetAssignmentReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	rep := &nodepb.GetAssignmentReply{Status: 200, Found: found, LeaderRead: true, Term: term}
	if !found {
		rep.Status = 404
		return rep, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return &nodepb.GetAssignmentReply{Status: 503, Error: err.Error()}, nil
	}
	rep.AssignmentJson = b
	return rep, nil
}

// ForwardCommand (op 32): the leader applies a metastore command proposed on a follower.
func (s *Service) ForwardCommand(ctx context.Context, req *nodepb.ForwardCommandRequest) (*nodepb.ForwardCommandReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg, hint := s.notLeader()
		return &nodepb.ForwardCommandReply{Status: st, Error: msg, Reason: reason, LeaderHint: hint}, nil
	}
	res, idx, err := s.store.ApplyCommand(ctx, req.Command)
	if err != nil {
		st, reason, msg := errcode.Leader.Reply(err)
		return &nodepb.ForwardCommandReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return &nodepb.ForwardCommandReply{Status: 503, Error: err.Error()}, nil
	}
	return &nodepb.ForwardCommandReply{Status: 200, ResultJson: b, AppliedIndex: idx}, nil
}

// WatchCommits (op 33): streams coalesced "reservable" notices for partitions this node owns,
// with an empty keep-alive when idle.
func (s *Service) WatchCommits(req *nodepb.WatchCommitsRequest, stream grpc.ServerStreamingServer[nodepb.CommitNotices]) error {
	ctx := stream.Context()
	sub := s.e.SubscribeNotices()
	defer sub.Close()
	for {
		nctx, cancel := context.WithTimeout(ctx, noticeKeepAlive)
		refs := sub.Next(nctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		msg := &nodepb.CommitNotices{Partitions: make([]*nodepb.PartitionRef, len(refs))}
		for i, r := range refs {
			msg.Partitions[i] = &nodepb.PartitionRef{Topic: r.Topic, Partition: int32(r.Partition)}
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// nullAsAbsent undoes the JSON round trip of an absent schema: a nil json.RawMessage marshals
// as null and comes back as the 4 bytes "null", which is not "no schema".
func nullAsAbsent(raw json.RawMessage) json.RawMessage {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}
