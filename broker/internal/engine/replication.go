package engine

import (
	"context"
	"slices"
	"time"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/replication"
	"narad.dev/broker/internal/service"
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
		Source:       e.replicaSource,
		Segments:     e.replicaSegments,
		ProposeISR:   e.meta.SetISR,
		ProposeElect: e.meta.ElectLeader,
		OnISRChange: func(topic string, p int, change string, isr []string) {
			e.countISRChange(change)
			e.log.Info("audit", "event", "replication.isr."+change, "actor", e.cfg.NodeID, "topic", topic,
				"partition", p, "isr", isr, "outcome", "ok")
		},
		Stopping: func(id string) bool { // the store, not the view: the flag bumps no version
			m, ok := e.meta.Member(id)
			return ok && m.Stopping
		},
		Host:   e.host,
		Logger: e.log,
		LagMax: e.cfg.ReplicaLagMax,
	})
}

// replicaSource reaches a leader over node RPC; without peers (a lone node) nothing can be
// followed.
func (e *Engine) replicaSource(addr, topic string, p int, incarnation string, wait time.Duration) replica.Source {
	if e.peers == nil {
		return noPeers{}
	}
	return meteredSource{e.peers.ReplicaSource(addr, topic, p, incarnation, wait), e.m.ReplicationBytes.WithLabelValues(metrics.ReplicationIn)}
}

// replicaSegments reaches a leader's sealed segments over node RPC for a follower's pre-copy;
// nil without peers.
func (e *Engine) replicaSegments(addr, topic string, p int) replica.SegmentSource {
	if e.peers == nil {
		return nil
	}
	src := e.peers.ReplicaSegments(addr, topic, p)
	if src == nil {
		return nil
	}
	return meteredSegments{src, e.m.ReplicationBytes.WithLabelValues(metrics.ReplicationIn)}
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
// node, from the local replica. The list is kept until the metadata version moves, and then
// rebuilt from the topic records, reading assignments of replicated topics only, so a cluster
// of unreplicated topics pays one scan of its topic records per change.
func (e *Engine) replicatedSlots() []replication.Slot {
	ver := e.meta.MetadataVersion()
	e.slotsMu.Lock()
	defer e.slotsMu.Unlock()
	if e.slots.ok && e.slots.version == ver {
		return e.slots.list
	}
	var out []replication.Slot
	for _, t := range e.meta.Topics("", 0) {
		if t.RF() < 2 {
			continue
		}
		for _, a := range e.meta.Assignments(t.Name) {
			if slices.Contains(a.ReplicaSet(), e.cfg.NodeID) {
				out = append(out, replication.Slot{Topic: t, A: a})
			}
		}
	}
	e.slots.version, e.slots.list, e.slots.ok = ver, out, true
	return out
}

// slotCache is replicatedSlots' list and the metadata version it was read at.
type slotCache struct {
	version uint64
	list    []replication.Slot
	ok      bool
}

// replicates reports whether the local replica names this node as a replica of (topic, p)
// (the partition registry's Deps.Replicates).
func (e *Engine) replicates(topic string, p int) bool {
	a, ok := e.view.Assignment(topic, p)
	return ok && slices.Contains(a.ReplicaSet(), e.cfg.NodeID)
}

// ReplicaHost is the leader side of this node's replicated partitions, for node RPC; it
// counts the frame bytes it serves (narad_replication_bytes_total{direction="out"}).
func (e *Engine) ReplicaHost() MeteredHost {
	return MeteredHost{Host: e.host, out: e.m.ReplicationBytes.WithLabelValues(metrics.ReplicationOut)}
}

// replicated reports whether t's partitions are replicated (R ≥ 2).
func replicated(t meta.Topic) bool { return t.RF() >= 2 }

// addressedEpoch is the leader epoch a consume or ack forwarded to partition p's leader
// names (docs/internals/replication.md §7): the epoch of the local replica's assignment for a
// replicated topic, none otherwise. The leader refuses another epoch with stale_epoch, which
// the forwarding answers as a leadership that moved (503, retry).
func (e *Engine) addressedEpoch(t meta.Topic, p int) service.LeaderEpoch {
	if !replicated(t) {
		return service.LeaderEpoch{}
	}
	a, ok := e.view.Assignment(t.Name, p)
	if !ok {
		return service.LeaderEpoch{}
	}
	return service.EpochOf(a.LeaderEpoch)
}
