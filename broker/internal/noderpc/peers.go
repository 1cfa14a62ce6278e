package noderpc

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// commitRPCTimeout bounds one CommitProduceBatch call (docs/internals/produce-path.md §4: a slow
// fsync is not a dead node).
const commitRPCTimeout = 30 * time.Second

// Peers is the client side of the node RPC: it implements engine.Peers,
// engine.RemoteCommitter, meta.LeaderReader and meta.Forwarder over the rpc pool, turning
// each reply's status and reason back into errcode's sentinels by the plane of its op.
type Peers struct {
	pool *rpc.Pool
	// grpcSegments: segment streams always go over gRPC, never raw (tests and benchmarks
	// of the gRPC stream).
	grpcSegments bool
}

// NewPeers returns the node RPC client over pool.
func NewPeers(pool *rpc.Pool) Peers { return Peers{pool: pool} }

var (
	_ engine.Peers           = Peers{}
	_ engine.RemoteCommitter = Peers{}
	_ meta.LeaderReader      = Peers{}
)

// dataError reads a data-plane reply (errcode.Data).
func dataError(status int32, reason, msg string) error {
	return errcode.Data.Error(status, reason, msg)
}

// leaderError reads a leader-plane reply (errcode.Leader, or errcode.LeaderCreate for a
// create, whose 409 from an older leader means "exists").
func leaderError(status int32, reason, msg string, create bool) error {
	if create {
		return errcode.LeaderCreate.Error(status, reason, msg)
	}
	return errcode.Leader.Error(status, reason, msg)
}

// transportError wraps a gRPC failure: the peer could not be asked (or did not answer).
func transportError(addr string, err error) error {
	return fmt.Errorf("%w: peer %s: %v", errcode.ErrUnavailable, addr, err)
}

func (p Peers) client(addr string) (nodepb.NodeClient, error) {
	c, err := p.pool.Client(addr)
	if err != nil {
		return nil, transportError(addr, err)
	}
	return c, nil
}

// Consume implements engine.Peers (op 2).
func (p Peers) Consume(ctx context.Context, addr, topic string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
	c, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	rep, err := c.Consume(ctx, &nodepb.ConsumeRequest{Topic: topic, Partition: int32(req.Partition), Offset: req.Offset,
		WaitMs: req.Wait.Milliseconds(), LocalOnly: localOnly, MaxMessages: int32(req.Max), LeaderEpoch: wireEpoch(req.Epoch),
		TakenBytes: int64(req.Taken)})
	if err != nil {
		return nil, transportError(addr, err)
	}
	if rep.Status == 204 {
		return nil, nil
	}
	if err := errcode.Consume.Error(rep.Status, rep.Reason, rep.Error); err != nil {
		return nil, err
	}
	out := make([]service.Message, len(rep.Messages))
	for i, m := range rep.Messages {
		out[i] = service.Message{Topic: topic, Partition: int(m.Partition), Offset: m.Offset, Key: m.Key, Payload: m.Payload,
			CommittedAtMs: m.CommittedAtMs, ReceiptHandle: m.ReceiptHandle}
	}
	return out, nil
}

// Ack implements engine.Peers (op 31).
func (p Peers) Ack(ctx context.Context, addr, topic string, entries []service.AckEntry) ([]error, error) {
	c, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	req := &nodepb.AckBatchRequest{Topic: topic, Entries: make([]*nodepb.AckEntry, len(entries))}
	for i, en := range entries {
		mode := nodepb.AckMode_ACK_MODE_ACK
		switch en.Op {
		case service.OpExtend:
			mode = nodepb.AckMode_ACK_MODE_EXTEND
		case service.OpNack:
			mode = nodepb.AckMode_ACK_MODE_NACK
		}
		req.Entries[i] = &nodepb.AckEntry{Partition: int32(en.Partition), Offset: en.Offset, Nonce: en.Nonce, Mode: mode,
			LeaderEpoch: wireEpoch(en.Epoch)}
	}
	rep, err := c.AckBatch(ctx, req)
	if err != nil {
		return nil, transportError(addr, err)
	}
	if rep.Status != 200 {
		return nil, dataError(rep.Status, rep.Reason, rep.Error)
	}
	if len(rep.Results) != len(entries) {
		return nil, fmt.Errorf("%w: peer %s answered %d results for %d entries", errcode.ErrUnavailable, addr, len(rep.Results), len(entries))
	}
	out := make([]error, len(entries))
	for i, r := range rep.Results {
		out[i] = errcode.AckResult.Error(r.Status, r.Reason, r.Error)
	}
	return out, nil
}

// PartitionStats implements engine.Peers (op 8, peek).
func (p Peers) PartitionStats(ctx context.Context, addr, topic string, partition int) (service.PartitionStats, error) {
	c, err := p.client(addr)
	if err != nil {
		return service.PartitionStats{}, err
	}
	rep, err := c.TopicPartitionStats(ctx, &nodepb.TopicPartitionStatsRequest{Topic: topic, Partition: int32(partition),
		Mode: nodepb.StatsMode_STATS_MODE_PEEK})
	if err != nil {
		return service.PartitionStats{}, transportError(addr, err)
	}
	if err := dataError(rep.Status, rep.Reason, rep.Error); err != nil {
		return service.PartitionStats{}, err
	}
	return service.PartitionStats{Index: partition, Available: rep.Available, Segments: int(rep.Segments),
		OldestOffset: rep.OldestOffset, NextOffset: rep.NextOffset, HighWatermark: rep.Hwm, SizeBytes: rep.SizeBytes,
		OldestSegmentAt: rep.OldestSegmentAtUnixMs / 1000, FollowerLag: rep.FollowerLag}, nil
}

// CreateTopic implements engine.Peers (op 4).
func (p Peers) CreateTopic(ctx context.Context, addr string, req service.CreateTopicRequest) (meta.Topic, uint64, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return meta.Topic{}, 0, fmt.Errorf("%w: %v", errcode.ErrInvalid, err)
	}
	return p.topicWrite(ctx, addr, true, func(c nodepb.NodeClient) (*nodepb.TopicWriteReply, error) {
		return c.CreateTopic(ctx, &nodepb.TopicWriteRequest{Name: req.Name, RequestJson: b})
	})
}

// AlterTopic implements engine.Peers (op 5).
func (p Peers) AlterTopic(ctx context.Context, addr, name string, req service.AlterTopicRequest) (meta.Topic, uint64, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return meta.Topic{}, 0, fmt.Errorf("%w: %v", errcode.ErrInvalid, err)
	}
	return p.topicWrite(ctx, addr, false, func(c nodepb.NodeClient) (*nodepb.TopicWriteReply, error) {
		return c.AlterTopic(ctx, &nodepb.TopicWriteRequest{Name: name, RequestJson: b})
	})
}

// DeleteTopic implements engine.Peers (op 6).
func (p Peers) DeleteTopic(ctx context.Context, addr, name string) (uint64, error) {
	_, idx, err := p.topicWrite(ctx, addr, false, func(c nodepb.NodeClient) (*nodepb.TopicWriteReply, error) {
		return c.DeleteTopic(ctx, &nodepb.TopicWriteRequest{Name: name})
	})
	return idx, err
}

func (p Peers) topicWrite(ctx context.Context, addr string, create bool, call func(nodepb.NodeClient) (*nodepb.TopicWriteReply, error)) (meta.Topic, uint64, error) {
	c, err := p.client(addr)
	if err != nil {
		return meta.Topic{}, 0, err
	}
	rep, err := call(c)
	if err != nil {
		// Outcome unknown: the leader may have applied it (docs/internals/http-api.md §1.6: 503, retry).
		return meta.Topic{}, 0, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, addr, err)
	}
	if err := leaderError(rep.Status, rep.Reason, rep.Error, create); err != nil {
		return meta.Topic{}, 0, err
	}
	var t meta.Topic
	if len(rep.TopicJson) > 0 {
		if err := json.Unmarshal(rep.TopicJson, &t); err != nil {
			return meta.Topic{}, 0, fmt.Errorf("%w: undecodable topic from leader: %v", meta.ErrNoLeader, err)
		}
	}
	return t, rep.AppliedIndex, nil
}

// CommitRemote implements engine.RemoteCommitter (op 11).
func (p Peers) CommitRemote(ctx context.Context, addr, topic, incarnation string, partition int, recs []wal.Record) error {
	c, err := p.client(addr)
	if err != nil {
		return err
	}
	req := &nodepb.CommitProduceBatchRequest{Topic: topic, Incarnation: incarnation, Partition: int32(partition),
		Entries: make([]*nodepb.ProduceEntry, len(recs))}
	for i, r := range recs {
		req.Entries[i] = &nodepb.ProduceEntry{Key: []byte(r.Key), Payload: r.Payload, AcceptedAtMs: r.AcceptedAtMs}
	}
	cctx, cancel := context.WithTimeout(ctx, commitRPCTimeout)
	defer cancel()
	rep, err := c.CommitProduceBatch(cctx, req)
	if err != nil {
		return transportError(addr, err)
	}
	return dataError(rep.Status, rep.Reason, rep.Error)
}

// ConfirmTopic implements meta.LeaderReader (op 20 with leader_read).
func (p Peers) ConfirmTopic(ctx context.Context, leaderID, leaderAddr, name string) (meta.Topic, bool, error) {
	c, err := p.client(leaderAddr)
	if err != nil {
		return meta.Topic{}, false, err
	}
	rep, err := c.GetTopic(ctx, &nodepb.GetTopicRequest{Name: name, LeaderRead: true})
	if err != nil {
		return meta.Topic{}, false, transportError(leaderAddr, err)
	}
	return decodeLeaderRead[meta.Topic](leaderID, rep.Status, rep.Reason, rep.Error, rep.LeaderRead, rep.TopicJson)
}

// ConfirmAssignment implements meta.LeaderReader (op 28).
func (p Peers) ConfirmAssignment(ctx context.Context, leaderID, leaderAddr, topic string, partition int) (meta.Assignment, bool, error) {
	c, err := p.client(leaderAddr)
	if err != nil {
		return meta.Assignment{}, false, err
	}
	rep, err := c.GetAssignment(ctx, &nodepb.GetAssignmentRequest{Topic: topic, Partition: int32(partition)})
	if err != nil {
		return meta.Assignment{}, false, transportError(leaderAddr, err)
	}
	return decodeLeaderRead[meta.Assignment](leaderID, rep.Status, rep.Reason, rep.Error, rep.LeaderRead, rep.AssignmentJson)
}

// decodeLeaderRead applies the caller rules of docs/internals/metastore.md §9 to a leader-read reply:
// only a reply marked leader_read confirms anything; 404 is authoritatively absent, 200 carries
// the JSON record; everything else is unconfirmed.
func decodeLeaderRead[T any](leaderID string, status int32, reason, msg string, marked bool, body []byte) (T, bool, error) {
	var zero T
	if !marked {
		return zero, false, fmt.Errorf("reply from %s not marked leader_read (status %d): %s", leaderID, status, msg)
	}
	switch status {
	case 404:
		return zero, false, nil
	case 200:
		var v T
		if err := json.Unmarshal(body, &v); err != nil {
			return zero, false, fmt.Errorf("undecodable record from %s: %w", leaderID, err)
		}
		return v, true, nil
	}
	return zero, false, leaderError(status, reason, msg, false)
}

// NodeStatus asks a member about itself (op 29), for the controller's promotion check.
func (p Peers) NodeStatus(ctx context.Context, addr string) (*nodepb.NodeStatusReply, error) {
	c, err := p.client(addr)
	if err != nil {
		return nil, err
	}
	rep, err := c.NodeStatus(ctx, &nodepb.NodeStatusRequest{})
	if err != nil {
		return nil, transportError(addr, err)
	}
	if rep.Status != 200 {
		return nil, dataError(rep.Status, rep.Reason, rep.Error)
	}
	return rep, nil
}

// Forward implements meta.Forwarder (op 32): a follower's proposal applied by the leader.
func (p Peers) Forward(ctx context.Context, leaderID, leaderAddr string, command []byte) (meta.Result, uint64, error) {
	c, err := p.client(leaderAddr)
	if err != nil {
		return meta.Result{}, 0, fmt.Errorf("%w: %v", meta.ErrNoLeader, err)
	}
	rep, err := c.ForwardCommand(ctx, &nodepb.ForwardCommandRequest{Command: command})
	if err != nil {
		return meta.Result{}, 0, fmt.Errorf("%w: leader %s: %v", meta.ErrNoLeader, leaderID, err)
	}
	if rep.Status != 200 {
		return meta.Result{}, 0, leaderError(rep.Status, rep.Reason, rep.Error, false)
	}
	var res meta.Result
	if err := json.Unmarshal(rep.ResultJson, &res); err != nil {
		return meta.Result{}, 0, fmt.Errorf("%w: undecodable result from %s: %v", meta.ErrNoLeader, leaderID, err)
	}
	return res, rep.AppliedIndex, nil
}

// TopicKnown implements engine.Peers (op 20 without leader_read: the peer's local replica).
func (p Peers) TopicKnown(ctx context.Context, addr, name string) (bool, error) {
	c, err := p.client(addr)
	if err != nil {
		return false, err
	}
	rep, err := c.GetTopic(ctx, &nodepb.GetTopicRequest{Name: name})
	if err != nil {
		return false, transportError(addr, err)
	}
	switch rep.Status {
	case 200:
		return true, nil
	case 404:
		return false, nil
	}
	return false, leaderError(rep.Status, rep.Reason, rep.Error, false)
}
