package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"narad.dev/broker/internal/errcode"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
	"narad.dev/broker/internal/schema"
	"narad.dev/broker/internal/service"
)

// newID returns 8 random bytes as 16 lowercase hex chars (incarnations, attach epochs).
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CreateTopic implements api.Backend. Creates wait behind the create gate until the node has
// caught up at boot (docs/internals/metastore.md §1 step 3).
func (e *Engine) CreateTopic(ctx context.Context, req service.CreateTopicRequest) (meta.Topic, error) {
	select {
	case <-e.createGate:
	case <-ctx.Done():
		return meta.Topic{}, fmt.Errorf("%w: node is starting", errcode.ErrUnavailable)
	}
	if _, ok := e.view.Topic(req.Name); ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", req.Name, errcode.ErrExists)
	}
	// A follower forwards the create to the leader (op 4), which places the partitions under
	// its placement lock.
	var fwd meta.Topic
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		fctx, cancel := context.WithTimeout(ctx, forwardCreateTimeout)
		defer cancel()
		t, idx, err := e.peers.CreateTopic(fctx, addr, req)
		fwd = t
		return idx, err
	})
	if forwarded || err != nil {
		if err != nil {
			return meta.Topic{}, err
		}
		if t, ok := e.view.Topic(req.Name); ok {
			return t, nil
		}
		return fwd, nil
	}
	return e.CreateTopicAsLeader(ctx, req)
}

// CreateTopicAsLeader creates a topic on the Raft leader (the local half of CreateTopic, and
// node RPC op 4): defaults, placement under the placement lock, one Raft entry.
func (e *Engine) CreateTopicAsLeader(ctx context.Context, req service.CreateTopicRequest) (meta.Topic, error) {
	select {
	case <-e.createGate:
	case <-ctx.Done():
		return meta.Topic{}, fmt.Errorf("%w: node is starting", errcode.ErrUnavailable)
	}
	if _, ok := e.view.Topic(req.Name); ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", req.Name, errcode.ErrExists)
	}
	t := meta.Topic{
		Name:                      req.Name,
		Partitions:                req.Partitions,
		RetentionMs:               e.cfg.DefaultRetentionMs,
		VisibilityTimeoutMs:       orDefault(req.VisibilityTimeoutMs, meta.DefaultVisibilityTimeoutMs),
		MaxInFlightPerPartition:   orDefault(req.MaxInFlightPerPartition, meta.DefaultMaxInFlight),
		MaxAckedAheadPerPartition: orDefault(req.MaxAckedAheadPerPartition, meta.DefaultMaxAckedAhead),
		CreatedAt:                 e.now().Unix(),
		Owner:                     req.Owner,
		Incarnation:               newID(),
		Role:                      meta.RoleStandalone,
		ReplicationFactor:         req.ReplicationFactor,
		MinInsyncReplicas:         req.MinInsyncReplicas,
		UncleanLeaderElection:     req.UncleanLeaderElection,
	}
	if t.ReplicationFactor == 0 && e.cfg.DefaultReplicationFactor > 1 {
		t.ReplicationFactor = e.cfg.DefaultReplicationFactor
	}
	if t.ReplicationFactor == 1 {
		t.ReplicationFactor = 0 // stored as before replication existed
	}
	if t.MinInsyncReplicas == 0 && t.RF() >= 2 && e.cfg.DefaultMinInsyncReplicas > 0 {
		t.MinInsyncReplicas = min(e.cfg.DefaultMinInsyncReplicas, t.RF())
	}
	if t.MinInsyncReplicas > t.RF() {
		return meta.Topic{}, fmt.Errorf("min_insync_replicas %d is above the replication factor %d: %w",
			t.MinInsyncReplicas, t.RF(), errcode.ErrInvalid)
	}
	if t.Partitions == 0 {
		t.Partitions = e.cfg.DefaultPartitions
	}
	if t.Partitions < meta.MinPartitions || t.Partitions > e.cfg.MaxPartitions {
		return meta.Topic{}, fmt.Errorf("partitions must be %d…%d: %w", meta.MinPartitions, e.cfg.MaxPartitions, errcode.ErrInvalid)
	}
	if req.RetentionMs != nil {
		t.RetentionMs = *req.RetentionMs
	}
	create := meta.TopicCreate{Topic: t, Schema: req.Schema}
	var parent *placement.Parent
	if req.Parent != "" {
		// One-call child create (docs/internals/http-api.md §2.2.1): the attach point is read first; the
		// link, the topic and placements away from the parent's owners land in one entry.
		pt, ok := e.view.Topic(req.Parent)
		if !ok {
			return meta.Topic{}, fmt.Errorf("parent topic %q: %w", req.Parent, errcode.ErrNotFound)
		}
		offsets, err := e.fan.AttachPoint(ctx, pt)
		if err != nil {
			return meta.Topic{}, err
		}
		create.Attach = &meta.AttachSpec{Parent: pt.Name, Epoch: newID(), DelayMs: req.FanoutDelayMs, Offsets: offsets}
		parent = placement.ParentOf(pt.Partitions, e.view.Assignments(pt.Name))
	}
	// One Raft entry: topic, placement and schema land together or not at all.
	var err error
	e.placementLock.Lock()
	if t.RF() >= 2 {
		create.Assignments, err = e.placeReplicated(t, 0, t.Partitions, req.Parent)
	} else {
		create.Assignments = e.placeUnder(t.Name, 0, t.Partitions, parent)
	}
	if err == nil {
		_, err = e.meta.CreateTopicWith(ctx, create)
	}
	e.placementLock.Unlock()
	if err != nil {
		return meta.Topic{}, err
	}
	got, ok := e.view.Topic(t.Name)
	if !ok {
		return meta.Topic{}, fmt.Errorf("%w: topic vanished after create", errcode.ErrUnavailable)
	}
	return got, nil
}

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// place assigns partitions [from, to) of a new topic or partition increase (docs/internals/metastore.md §12, placement package): candidates are alive, non-draining members sorted by id; owner =
// candidates[p mod n]. With no member records yet (first boot), this node takes them.
func (e *Engine) place(topic string, from, to int) []meta.Assignment {
	return e.placeUnder(topic, from, to, nil)
}

// placeUnder is place for a child of parent (nil = standalone): child partition p avoids the
// owner of parent partition p; partitions deferred by the rule are left to the controller.
func (e *Engine) placeUnder(topic string, from, to int, parent *placement.Parent) []meta.Assignment {
	cand := placement.Candidates(e.meta.Members())
	if len(cand) == 0 {
		cand = []string{e.cfg.NodeID}
	}
	out, _ := placement.Place(cand, topic, placement.Range(from, to), parent)
	return out
}

// placeReplicated places partitions [from, to) of replicated topic t
// (docs/internals/replication.md §3): R replicas each on live, non-draining members, racks
// apart, leaders spread, a child's replicas off its parent's where a balanced choice allows;
// every replica starts in the ISR (every copy starts empty). Fewer members than R is
// errcode.ErrNotEnoughMembers (422). Caller holds the placement lock.
func (e *Engine) placeReplicated(t meta.Topic, from, to int, parent string) ([]meta.Assignment, error) {
	spec := placement.ReplicaSpec{Nodes: placement.Nodes(e.meta.Members()), R: t.RF(),
		Parts: placement.Range(from, to), Load: placement.LoadOf(e.meta.AllAssignments())}
	if parent != "" {
		spec.Avoid = map[int][]string{}
		for _, a := range e.view.Assignments(parent) {
			spec.Avoid[a.Partition] = a.ReplicaSet()
		}
	}
	reps, err := placement.PlaceReplicas(spec)
	if err != nil {
		return nil, fmt.Errorf("replication_factor %d: %w", t.RF(), err)
	}
	out := make([]meta.Assignment, len(reps))
	for i, r := range reps {
		out[i] = meta.Assignment{Topic: t.Name, Partition: from + i, Owner: r[0], Replicas: r, ISR: r}
	}
	return out, nil
}

// ListTopics implements api.Backend (keyset pagination by name).
func (e *Engine) ListTopics(after string, limit int) ([]meta.Topic, string) {
	ts := e.meta.Topics(after, limit+1)
	if len(ts) > limit {
		ts = ts[:limit]
		return ts, ts[len(ts)-1].Name
	}
	return ts, ""
}

// Topic implements api.Backend.
func (e *Engine) Topic(name string) (meta.Topic, bool) { return e.view.Topic(name) }

func (e *Engine) allTopics() []meta.Topic {
	var out []meta.Topic
	after := ""
	for {
		ts := e.meta.Topics(after, 1000)
		out = append(out, ts...)
		if len(ts) < 1000 {
			return out
		}
		after = ts[len(ts)-1].Name
	}
}

// PartitionStats implements api.Backend: local partitions here, remote ones from their owners
// (op 8, 16 in flight); an owner that is dead or does not answer is reported
// available=false instead of failing the describe.
func (e *Engine) PartitionStats(ctx context.Context, t meta.Topic, partition int) []service.PartitionStats {
	out := e.LocalPartitionStats(t, partition)
	if e.peers == nil {
		return out
	}
	fanIn(len(out), func(i int) {
		st := &out[i]
		if st.OwnerNode == "" || st.OwnerNode == e.cfg.NodeID {
			return
		}
		o := e.ownerOf(t.Name, st.Index)
		if o.dead || o.addr == "" {
			return
		}
		sctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		got, err := e.peers.PartitionStats(sctx, o.addr, t.Name, st.Index)
		if errors.Is(err, errcode.ErrNotFound) {
			// The owner's replica has not applied the create yet (milliseconds behind ours):
			// ask once more before calling the partition unavailable.
			time.Sleep(statsRetryPause)
			got, err = e.peers.PartitionStats(sctx, o.addr, t.Name, st.Index)
		}
		if err != nil {
			e.log.Debug("remote partition stats", "topic", t.Name, "partition", st.Index, "owner", o.id, "err", err)
			return
		}
		got.Index, got.OwnerNode, got.TargetNode = st.Index, st.OwnerNode, st.TargetNode
		got.Replicas, got.Leader, got.LeaderEpoch, got.ISR = st.Replicas, st.Leader, st.LeaderEpoch, st.ISR
		*st = got
	})
	return out
}

// LocalPartitionStats describes t's partitions (all when partition < 0) from this node's disk
// only; partitions owned elsewhere carry only their owner. It never opens a closed log nor
// stamps its access time: open logs answer from memory, closed ones from their directory and
// hwm file.
func (e *Engine) LocalPartitionStats(t meta.Topic, partition int) []service.PartitionStats {
	var out []service.PartitionStats
	for p := 0; p < t.Partitions; p++ {
		if partition >= 0 && p != partition {
			continue
		}
		st := service.PartitionStats{Index: p}
		a, ok := e.view.Assignment(t.Name, p)
		if ok {
			st.OwnerNode, st.TargetNode = a.Owner, a.Target
			if replicated(t) {
				epoch := a.LeaderEpoch
				st.Replicas, st.Leader, st.LeaderEpoch, st.ISR = a.ReplicaSet(), a.Owner, &epoch, a.InSync()
				if ld, ok := e.host.Leader(t.Name, p); ok && ld.Epoch() == a.LeaderEpoch {
					st.FollowerLag = ld.Lag()
				}
			}
		}
		if !ok || a.Owner != e.cfg.NodeID {
			out = append(out, st) // remote owners are asked by the cluster layer; unknown here
			continue
		}
		var s plog.Stats
		if pt := e.parts.Peek(t.Name, p); pt != nil && pt.Incarnation() == t.Incarnation {
			s = pt.Log().Stats()
		} else if dir := e.parts.PartitionDir(t.Name, p); dirExists(dir) && e.parts.MarkerMatches(t) {
			var err error
			if s, err = plog.PeekDir(dir); err != nil {
				e.log.Warn("describe closed partition", "topic", t.Name, "partition", p, "err", err)
				out = append(out, st)
				continue
			}
		}
		st.Available = true
		st.Segments = s.Segments
		st.OldestOffset, st.NextOffset, st.HighWatermark, st.SizeBytes = s.OldestOffset, s.NextOffset, s.HighWatermark, s.SizeBytes
		if !s.OldestSegmentAt.IsZero() {
			st.OldestSegmentAt = s.OldestSegmentAt.Unix()
		}
		out = append(out, st)
	}
	return out
}

// AlterTopic implements api.Backend: a follower forwards it to the leader (op 5).
func (e *Engine) AlterTopic(ctx context.Context, name string, req service.AlterTopicRequest) (meta.Topic, error) {
	if _, ok := e.view.Topic(name); !ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, errcode.ErrNotFound)
	}
	var fwd meta.Topic
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		fctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
		defer cancel()
		t, idx, err := e.peers.AlterTopic(fctx, addr, name, req)
		fwd = t
		return idx, err
	})
	if forwarded || err != nil {
		if err != nil {
			return meta.Topic{}, err
		}
		if t, ok := e.view.Topic(name); ok {
			return t, nil
		}
		return fwd, nil
	}
	return e.AlterTopicAsLeader(ctx, name, req)
}

// AlterTopicAsLeader validates every change and proposes them in one entry (the leader side of
// AlterTopic and op 5); new partitions are placed under the placement lock.
func (e *Engine) AlterTopicAsLeader(ctx context.Context, name string, req service.AlterTopicRequest) (meta.Topic, error) {
	t, ok := e.view.Topic(name)
	if !ok {
		return meta.Topic{}, fmt.Errorf("topic %q: %w", name, errcode.ErrNotFound)
	}
	old := t.Partitions
	if req.Partitions != 0 {
		if req.Partitions <= t.Partitions || req.Partitions > e.cfg.MaxPartitions {
			return meta.Topic{}, fmt.Errorf("partitions must grow and be at most %d: %w", e.cfg.MaxPartitions, errcode.ErrInvalid)
		}
		t.Partitions = req.Partitions
	}
	if req.RetentionMs != nil {
		for _, c := range t.Children {
			if ct, ok := e.view.Topic(c); ok && ct.FanoutDelayMs > 0 && *req.RetentionMs != 0 && *req.RetentionMs < ct.FanoutDelayMs+meta.MinRetentionMs {
				return meta.Topic{}, fmt.Errorf("retention below delay child %q's delay + 1h: %w", c, errcode.ErrConflict)
			}
		}
		t.RetentionMs = *req.RetentionMs
	}
	if req.VisibilityTimeoutMs != nil {
		t.VisibilityTimeoutMs = orDefault(*req.VisibilityTimeoutMs, meta.DefaultVisibilityTimeoutMs)
	}
	if req.MaxInFlightPerPartition != nil {
		t.MaxInFlightPerPartition = orDefault(*req.MaxInFlightPerPartition, meta.DefaultMaxInFlight)
	}
	if req.MaxAckedAheadPerPartition != nil {
		t.MaxAckedAheadPerPartition = orDefault(*req.MaxAckedAheadPerPartition, meta.DefaultMaxAckedAhead)
	}
	if len(req.Schema) > 0 {
		if t.Parent != "" {
			return meta.Topic{}, fmt.Errorf("schema of an attached child follows its parent: %w", errcode.ErrConflict)
		}
		if cur, ok := e.meta.LatestSchema(name); ok {
			if err := schema.CheckCompatible(cur.Doc, req.Schema); err != nil {
				return meta.Topic{}, fmt.Errorf("%w: %v", errcode.ErrInvalid, err)
			}
		}
	}
	replication, err := e.alterReplication(&t, req)
	if err != nil {
		return meta.Topic{}, err
	}
	// One Raft entry: every field, the schema version and the new partitions' placement.
	e.placementLock.Lock()
	added := e.place(name, old, t.Partitions)
	if t.RF() >= 2 && t.Partitions > old {
		added, err = e.placeReplicated(t, old, t.Partitions, t.Parent)
	}
	var got meta.Topic
	if err == nil {
		got, err = e.meta.AlterTopic(ctx, meta.TopicUpdate{Topic: t, Schema: req.Schema, Assignments: added,
			Replication: replication})
	}
	e.placementLock.Unlock()
	if err != nil {
		return meta.Topic{}, err
	}
	return got, nil
}

// DeleteTopic implements api.Backend; a follower forwards it to the leader (op 6). Every node
// purges its local data when the delete applies on its replica.
func (e *Engine) DeleteTopic(ctx context.Context, name string) error {
	forwarded, err := e.forwardWrite(ctx, func(addr string) (uint64, error) {
		fctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
		defer cancel()
		return e.peers.DeleteTopic(fctx, addr, name)
	})
	if forwarded || err != nil {
		return err
	}
	return e.DeleteTopicAsLeader(ctx, name)
}

// DeleteTopicAsLeader proposes the delete on the leader (op 6's local half).
func (e *Engine) DeleteTopicAsLeader(ctx context.Context, name string) error {
	_, err := e.meta.DeleteTopic(ctx, name)
	return err
}

// ValidatePayload implements api.Backend.
func (e *Engine) ValidatePayload(t meta.Topic, payload []byte) error {
	if t.SchemaVersion == 0 {
		return nil
	}
	s, ok := e.meta.LatestSchema(t.Name)
	if !ok {
		return nil
	}
	v, err := e.schemas.Validator(schema.Key{Topic: t.Name, Incarnation: t.Incarnation, Version: s.Version},
		func() (json.RawMessage, error) { return s.Doc, nil })
	if err != nil {
		return fmt.Errorf("%w: stored schema does not compile: %v", errcode.ErrUnavailable, err)
	}
	if err := v.Validate(payload); err != nil {
		// The validator's message already starts with "schema violation"; say it once.
		msg := strings.TrimPrefix(err.Error(), schema.ErrViolation.Error()+": ")
		return fmt.Errorf("%w: %s", errcode.ErrSchema, msg)
	}
	return nil
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// Schema implements api.SchemaReader: the topic's current schema document.
func (e *Engine) Schema(topic string) (json.RawMessage, bool) {
	s, ok := e.meta.LatestSchema(topic)
	if !ok {
		return nil, false
	}
	return s.Doc, true
}
