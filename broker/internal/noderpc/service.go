package noderpc

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// Service serves the node-to-node RPCs of docs/internals/node-rpc.md §4 on this node. Replies carry
// the op's status in HTTP vocabulary; 421 means "not the owner / not the leader".
type Service struct {
	nodepb.UnimplementedNodeServer
	e     *engine.Engine
	store *meta.Store
	log   *slog.Logger
	audit *audit.Logger // nil → an audit logger over log
	mv    MoveDeps      // ops 22–25 and 30 (service_move.go)
	// replicas is the leader side of replicated partitions (ops 34, 35); nil: this node
	// leads none, and both ops answer 421.
	replicas ReplicaHost
}

// Deps are what a Service answers from. Engine, Store and Log are required; a nil member of
// Moves makes the ops it serves answer 503.
type Deps struct {
	Engine *engine.Engine
	Store  *meta.Store
	Log    *slog.Logger
	Audit  *audit.Logger // nil: an audit logger over Log
	Moves  MoveDeps
	// Replicas serves ops 34 and 35; nil: they answer 421 (this node leads no replicated
	// partition).
	Replicas ReplicaHost
}

// NewService returns the node RPC service of this node, to register with rpc.NewServer.
func NewService(d Deps) *Service {
	return &Service{e: d.Engine, store: d.Store, log: d.Log, audit: d.Audit, mv: d.Moves, replicas: d.Replicas}
}

// eventJoin is the audit event of a node admitted to the cluster (op 21).
const eventJoin = "cluster.join"

// Refusals the service decides before asking the engine or the store. Each is a kind of an
// errcode sentinel, so the plane of the op gives its status and reason.
var (
	errUnknownTopic   = errcode.Sub("unknown topic", errcode.ErrNotFound)
	errPartitionRange = errcode.Sub("partition out of range", errcode.ErrInvalid)
	errNotTheOwner    = errcode.Sub("not the owner", errcode.ErrNotOwner)
	errNotTheLeader   = errcode.Sub("not the leader", errcode.ErrNotLeader)
)

// ownedPartition returns the topic of a data-plane request about one partition this node
// owns, or the refusal: an unknown topic, a partition out of range, another owner.
func (s *Service) ownedPartition(ctx context.Context, topic string, p int32) (meta.Topic, error) {
	t, ok := s.e.TopicForPeer(ctx, topic)
	switch {
	case !ok:
		return meta.Topic{}, errUnknownTopic
	case p < 0 || int(p) >= t.Partitions:
		return meta.Topic{}, errPartitionRange
	}
	if a, ok := s.store.Assignment(t.Name, int(p)); !ok || a.Owner != s.store.NodeID() {
		return meta.Topic{}, errNotTheOwner
	}
	return t, nil
}

// auditLog is the audit trail of the node-to-node calls.
func (s *Service) auditLog() *audit.Logger {
	if s.audit == nil {
		return audit.New(s.log, s.store.NodeID())
	}
	return s.audit
}

// Consume (op 2) serves a consume for partitions this node owns.
func (s *Service) Consume(ctx context.Context, req *nodepb.ConsumeRequest) (*nodepb.ConsumeReply, error) {
	t, ok := s.e.TopicForPeer(ctx, req.Topic)
	if !ok {
		st, reason, msg := errcode.Consume.Reply(errUnknownTopic)
		return &nodepb.ConsumeReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	max := int(req.MaxMessages)
	if max < 1 {
		max = 1
	}
	if req.Partition >= 0 {
		if err := s.checkEpoch(t.Name, int(req.Partition), epochFromWire(req.LeaderEpoch)); err != nil {
			st, reason, msg := errcode.Consume.Reply(err)
			return &nodepb.ConsumeReply{Status: st, Error: msg, Reason: string(reason)}, nil
		}
	}
	// The owner side never forwards: a reply about a partition owned elsewhere is a 421, so
	// two nodes with diverging replicas can never bounce a request between them.
	taken := 0 // a negative or oversized count from a peer is read as none or a full answer
	if req.TakenBytes > 0 {
		taken = int(min(req.TakenBytes, consume.DefaultMaxBytes))
	}
	msgs, err := s.e.Consume(ctx, t, service.ConsumeRequest{Partition: int(req.Partition), Offset: req.Offset,
		Wait: time.Duration(req.WaitMs) * time.Millisecond, Max: max, LocalOnly: true, Taken: taken})
	if err != nil {
		st, reason, msg := errcode.Consume.Reply(err)
		return &nodepb.ConsumeReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	// The reply holds the messages until gRPC has encoded it, after this returns; the budget
	// is given back here, so a node's replies to peers are bounded by their own budgets.
	defer s.e.ReleaseAnswer(msgs)
	if len(msgs) > 0 && ctx.Err() != nil {
		// The caller gave up (a probe's deadline passed while this node read): the reply
		// would be dropped with the messages leased, invisible until their leases expired.
		s.e.Requeue(t, msgs)
		st, reason, msg := errcode.Consume.Reply(ctx.Err())
		return &nodepb.ConsumeReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	if len(msgs) == 0 {
		return &nodepb.ConsumeReply{Status: 204}, nil
	}
	out := make([]*nodepb.Message, len(msgs))
	for i, m := range msgs {
		out[i] = &nodepb.Message{Partition: int32(m.Partition), Offset: m.Offset, Key: m.Key, Payload: m.Payload,
			CommittedAtMs: m.CommittedAtMs, ReceiptHandle: m.ReceiptHandle}
	}
	return &nodepb.ConsumeReply{Status: 200, Messages: out}, nil
}

// TopicPartitionStats (op 8): peek never opens a log.
func (s *Service) TopicPartitionStats(ctx context.Context, req *nodepb.TopicPartitionStatsRequest) (*nodepb.TopicPartitionStatsReply, error) {
	t, err := s.ownedPartition(ctx, req.Topic, req.Partition)
	if err != nil {
		st, reason, msg := errcode.Data.Reply(err)
		return &nodepb.TopicPartitionStatsReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	if req.Mode == nodepb.StatsMode_STATS_MODE_EXACT {
		// The attach point: open the log if needed so the HWM is exact. A remote link's start
		// point also reads the oldest offset and the consumer frontier.
		sp, err := s.e.ExactStartPoint(t, int(req.Partition))
		if err != nil {
			st, reason, msg := errcode.Data.Reply(err)
			return &nodepb.TopicPartitionStatsReply{Status: st, Error: msg, Reason: string(reason)}, nil
		}
		return &nodepb.TopicPartitionStatsReply{Status: 200, Hwm: sp.HighWatermark, OldestOffset: sp.Oldest,
			ConsumerFrontier: sp.Frontier, Exact: true, Available: true}, nil
	}
	st := s.e.LocalPartitionStats(t, int(req.Partition))
	if len(st) != 1 {
		return &nodepb.TopicPartitionStatsReply{Status: 503, Error: "no stats"}, nil
	}
	p := st[0]
	return &nodepb.TopicPartitionStatsReply{Status: 200, Hwm: p.HighWatermark, NextOffset: p.NextOffset,
		OldestOffset: p.OldestOffset, Segments: int64(p.Segments), SizeBytes: p.SizeBytes,
		OldestSegmentAtUnixMs: p.OldestSegmentAt * 1000, Exact: p.Available, Available: p.Available,
		FollowerLag: p.FollowerLag}, nil
}

// CommitProduceBatch (op 11): the owner-side commit of a dispatched batch.
func (s *Service) CommitProduceBatch(ctx context.Context, req *nodepb.CommitProduceBatchRequest) (*nodepb.CommitProduceBatchReply, error) {
	s.e.TopicForPeer(ctx, req.Topic) // a brand-new topic: let this replica catch up first
	recs := make([]wal.Record, len(req.Entries))
	for i, en := range req.Entries {
		recs[i] = wal.Record{Topic: req.Topic, Incarnation: req.Incarnation, Key: string(en.Key),
			Partition: uint32(req.Partition), AcceptedAtMs: en.AcceptedAtMs, Payload: en.Payload}
	}
	first, err := s.e.CommitLocal(ctx, req.Topic, req.Incarnation, int(req.Partition), recs)
	st, reason, msg := errcode.Data.Reply(err)
	return &nodepb.CommitProduceBatchReply{Status: st, Error: msg, Reason: string(reason), FirstOffset: first}, nil
}

// GetTopic (op 20): a local read, or with leader_read a leader-confirmed read behind a barrier
// issued after the request arrived (docs/internals/metastore.md §9).
func (s *Service) GetTopic(ctx context.Context, req *nodepb.GetTopicRequest) (*nodepb.GetTopicReply, error) {
	if req.LeaderRead {
		if !s.store.IsLeader() {
			st, reason, msg := errcode.Leader.Reply(errNotTheLeader)
			_, addr := s.store.Leader()
			return &nodepb.GetTopicReply{Status: st, Error: msg, Reason: string(reason), LeaderHint: addr}, nil
		}
		if err := s.store.Barrier(ctx); err != nil {
			return &nodepb.GetTopicReply{Status: 503, Error: err.Error()}, nil
		}
	}
	t, ok := s.store.Topic(req.Name)
	rep := &nodepb.GetTopicReply{Status: 200, Found: ok, LeaderRead: req.LeaderRead, Term: s.store.Raft().CurrentTerm()}
	if !ok {
		rep.Status = 404
		return rep, nil
	}
	b, err := json.Marshal(t)
	if err != nil {
		return &nodepb.GetTopicReply{Status: 503, Error: err.Error()}, nil
	}
	rep.TopicJson = b
	return rep, nil
}

// JoinCluster (op 21): the leader admits the caller as a non-voter.
func (s *Service) JoinCluster(ctx context.Context, req *nodepb.JoinClusterRequest) (*nodepb.JoinClusterReply, error) {
	if !s.store.IsLeader() {
		st, reason, msg := errcode.Leader.Reply(errNotTheLeader)
		_, addr := s.store.Leader()
		return &nodepb.JoinClusterReply{Status: st, Error: msg, Reason: string(reason), LeaderAddr: addr}, nil
	}
	if req.Id == "" || req.ClusterAddr == "" {
		st, reason, msg := errcode.Leader.Reply(errcode.Sub("id and cluster_addr are required", errcode.ErrInvalid))
		return &nodepb.JoinClusterReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	newLife := s.store.RaftRole(req.Id) == "none"
	if m, ok := s.store.Member(req.Id); ok && m.Draining && newLife {
		// A re-join after a decommission is a new life: it may receive partitions again
		// (docs/internals/metastore.md §11). The flag goes before the node enters the
		// configuration: the decommission duty removes a draining member that owns nothing as
		// soon as it sees it there, and would take the new life out again at once.
		if err := s.store.SetMemberDraining(ctx, req.Id, false); err != nil {
			s.log.Warn("clear drain flag of re-joining node", "node", req.Id, "err", err)
			return &nodepb.JoinClusterReply{Status: 503, Error: err.Error()}, nil
		}
	}
	if err := s.store.AddNonvoter(ctx, req.Id, req.ClusterAddr); err != nil {
		if newLife {
			s.auditLog().Record(ctx, audit.Event{Name: eventJoin, Actor: "node:" + req.Id, Target: req.Id, Outcome: audit.Unknown,
				Attrs: []any{"cluster_addr", req.ClusterAddr, "err", err}})
		}
		return &nodepb.JoinClusterReply{Status: 503, Error: err.Error()}, nil
	}
	if newLife {
		s.log.Info("admitted node as non-voter", "node", req.Id, "addr", req.ClusterAddr)
		s.auditLog().Record(ctx, audit.Event{Name: eventJoin, Actor: "node:" + req.Id, Target: req.Id, Outcome: audit.OK,
			Attrs: []any{"cluster_addr", req.ClusterAddr}})
	}
	return &nodepb.JoinClusterReply{Status: 200}, nil
}

// NodeStatus (op 29): this node's own view, for the controller's decommission guards.
func (s *Service) NodeStatus(ctx context.Context, _ *nodepb.NodeStatusRequest) (*nodepb.NodeStatusReply, error) {
	return &nodepb.NodeStatusReply{
		Status:              200,
		AppliedIndex:        s.store.AppliedIndex(),
		CaughtUp:            s.store.AppliedCaughtUp(),
		DrainingSeen:        s.e.DrainingSeen(),
		RefusingProduce:     s.e.RefusingProduce(),
		AdmittedInflight:    s.e.AdmittedInflight(),
		IngressUndispatched: int64(s.e.Undispatched()),
	}, nil
}

// AckBatch (op 31): entries applied one by one on the owner, results in request order.
func (s *Service) AckBatch(ctx context.Context, req *nodepb.AckBatchRequest) (*nodepb.AckBatchReply, error) {
	t, ok := s.e.TopicForPeer(ctx, req.Topic)
	if !ok {
		st, reason, msg := errcode.Data.Reply(errUnknownTopic)
		return &nodepb.AckBatchReply{Status: st, Error: msg, Reason: string(reason)}, nil
	}
	entries := make([]service.AckEntry, len(req.Entries))
	for i, en := range req.Entries {
		op := service.OpAck
		switch en.Mode {
		case nodepb.AckMode_ACK_MODE_EXTEND:
			op = service.OpExtend
		case nodepb.AckMode_ACK_MODE_NACK:
			op = service.OpNack
		}
		entries[i] = service.AckEntry{Partition: int(en.Partition), Offset: en.Offset, Nonce: en.Nonce, Op: op,
			Epoch: epochFromWire(en.LeaderEpoch)}
	}
	errs := s.ackFenced(t, entries)
	rep := &nodepb.AckBatchReply{Status: 200, Results: make([]*nodepb.AckResult, len(errs))}
	for i, err := range errs {
		st, reason, msg := errcode.AckResult.Reply(err)
		if err == nil {
			st = 204
		}
		rep.Results[i] = &nodepb.AckResult{Status: st, Error: msg, Reason: string(reason)}
	}
	return rep, nil
}
