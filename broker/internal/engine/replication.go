package engine

import (
	"context"
	"slices"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/replication"
)

// The engine's part in replicated partitions (docs/internals/replication.md §4–§7): the
// replication manager takes up leaderships and runs follower loops from the local replica's
// assignments; replica.Host serves this node's leaderships to followers (node RPC ops 34,
// 35); the partition registry keeps follower logs open and commits through the leaderships.

// newReplication builds the engine's replication manager and host.
func (e *Engine) newReplication() {
	e.host = replica.NewHost()
	e.repl = replication.New(replication.Deps{
		Self:       e.cfg.NodeID,
		Partitions: e.parts,
		Slots:      e.replicatedSlots,
		MemberAddr: func(id string) (string, bool) {
			m, ok := e.view.Member(id)
			return m.ClusterAddr, ok && m.ClusterAddr != ""
		},
		Source:     e.replicaSource,
		ProposeISR: e.meta.SetISR,
		OnISRChange: func(topic string, p int, change string, isr []string) {
			e.log.Info("audit", "event", "replication.isr."+change, "actor", e.cfg.NodeID, "topic", topic,
				"partition", p, "isr", isr, "outcome", "ok")
		},
		Host:   e.host,
		Logger: e.log,
	})
}

// replicaSource reaches a leader over node RPC; without peers (a lone node) nothing can be
// followed.
func (e *Engine) replicaSource(addr, topic string, p int, incarnation string, wait time.Duration) replica.Source {
	if e.peers == nil {
		return noPeers{}
	}
	return e.peers.ReplicaSource(addr, topic, p, incarnation, wait)
}

// noPeers is the replica.Source of a node without node RPC.
type noPeers struct{}

func (noPeers) Fetch(context.Context, replica.FetchRequest) (replica.FetchReply, error) {
	return replica.FetchReply{}, replica.ErrNotLeading
}

func (noPeers) EndOffset(context.Context, uint64, uint64) (uint64, int64, bool, error) {
	return 0, 0, false, replica.ErrNotLeading
}

// replicatedSlots lists the partitions of replicated topics whose replica set names this
// node, from the local replica.
func (e *Engine) replicatedSlots() []replication.Slot {
	var out []replication.Slot
	for _, a := range e.meta.AllAssignments() {
		if len(a.Replicas) < 2 || !slices.Contains(a.Replicas, e.cfg.NodeID) {
			continue
		}
		t, ok := e.view.Topic(a.Topic)
		if !ok || t.RF() < 2 {
			continue
		}
		out = append(out, replication.Slot{Topic: t, A: a})
	}
	return out
}

// replicates reports whether the local replica names this node as a replica of (topic, p)
// (the partition registry's Deps.Replicates).
func (e *Engine) replicates(topic string, p int) bool {
	a, ok := e.view.Assignment(topic, p)
	return ok && slices.Contains(a.ReplicaSet(), e.cfg.NodeID)
}

// ReplicaHost is the leader side of this node's replicated partitions, for node RPC.
func (e *Engine) ReplicaHost() *replica.Host { return e.host }

// replicated reports whether t's partitions are replicated (R ≥ 2).
func replicated(t meta.Topic) bool { return t.RF() >= 2 }
