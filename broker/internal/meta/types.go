// Package meta is Narad's metadata store: a hashicorp/raft replicated state machine whose
// state (topics, assignments, members, users, schemas, fan-out links) is durable in pebble.
//
// This file holds the state model shared by every layer (docs/internals/metastore.md §6). The records are
// JSON-encoded in the FSM with these field names, which are therefore stable.
package meta

import (
	"encoding/json"

	"narad.dev/broker/internal/errcode"
)

// Limits and defaults of the state model (docs/internals/http-api.md §1.7). Units are in the names.
const (
	MaxPartitions              = 108
	MinPartitions              = 3
	DefaultPartitions          = 3
	MaxChildren                = 108
	MinRetentionMs             = int64(3_600_000)      // 1 h; 0 = keep forever
	DefaultRetentionMs         = int64(604_800_000)    // 7 days
	MaxDelayMs                 = int64(31_536_000_000) // 365 days
	DefaultVisibilityTimeoutMs = int64(30_000)
	DefaultMaxInFlight         = int64(1024)
	DefaultMaxAckedAhead       = int64(1024)
)

// Upper bounds of the per-topic settings a client may set (docs/operating.md, Limits). The
// API refuses larger values with a 400; records already stored are not re-checked.
const (
	MaxRetentionMs               = int64(315_360_000_000) // 3,650 days; covers MaxDelayMs + 1 h
	MaxVisibilityTimeoutMs       = int64(43_200_000)      // 12 h (SQS's maximum)
	MaxInFlightPerPartitionLimit = int64(65_536)          // live leases per partition
	MaxAckedAheadPerPartition    = int64(65_536)          // parked out-of-order acks per partition
)

// Replication limits (docs/internals/replication.md §1). A stored 0 in a replication field
// means "unset" and reads as the default through the Topic accessors.
const (
	MaxReplicationFactor = 5 // replicas per partition, leader included
	// MaxReplicaSet bounds a stored replica list: a reassignment may hold the old and the
	// new replicas together for a while.
	MaxReplicaSet = 2 * MaxReplicationFactor
)

// Topic roles.
const (
	RoleStandalone = "standalone"
	RoleParent     = "parent"
	RoleChild      = "child"
)

// Topic is the replicated record of one topic (docs/internals/metastore.md §6).
// Incarnation never changes for the life of the record; a delete + recreate gets a new one.
type Topic struct {
	Name                      string   `json:"name"`
	Partitions                int      `json:"partitions"`
	RetentionMs               int64    `json:"retention_ms"`
	VisibilityTimeoutMs       int64    `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   int64    `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition int64    `json:"max_acked_ahead_per_partition"`
	CreatedAt                 int64    `json:"created_at"` // Unix seconds, stamped by the proposer
	Owner                     string   `json:"owner,omitempty"`
	Incarnation               string   `json:"incarnation"`              // 16 lowercase hex
	SchemaVersion             uint32   `json:"schema_version,omitempty"` // latest schema version; 0 = none
	Role                      string   `json:"role"`
	Children                  []string `json:"children,omitempty"`
	Parent                    string   `json:"parent,omitempty"`
	AttachEpoch               string   `json:"attach_epoch,omitempty"`
	AttachOffsets             []int64  `json:"attach_offsets,omitempty"`
	FanoutDelayMs             int64    `json:"fanout_delay_ms,omitempty"`
	// RemoteLinks lists the parent's remote children (id + epoch; the links themselves live
	// under r/). They count toward MaxChildren with Children.
	RemoteLinks []RemoteRef `json:"remote_links,omitempty"`
	// Replication settings (docs/internals/replication.md §1). 0 / absent = unset: records
	// written before they existed read as R = 1, M = 1 through RF and MinISR; read them
	// through those accessors, never directly.
	ReplicationFactor     int  `json:"replication_factor,omitempty"`  // R, 1 … MaxReplicationFactor
	MinInsyncReplicas     int  `json:"min_insync_replicas,omitempty"` // M, 1 … R; default min(2, R)
	UncleanLeaderElection bool `json:"unclean_leader_election,omitempty"`
}

// RF is the topic's replication factor R: the stored value, 1 when unset.
func (t Topic) RF() int {
	if t.ReplicationFactor <= 0 {
		return 1
	}
	return t.ReplicationFactor
}

// MinISR is the topic's min_insync_replicas M: the stored value, min(2, R) when unset.
func (t Topic) MinISR() int {
	if t.MinInsyncReplicas <= 0 {
		return min(2, t.RF())
	}
	return t.MinInsyncReplicas
}

// Assignment says which node serves a partition now (Owner, the leader) and where it should
// end up (Target, empty when settled; R = 1 moves only). Exactly one owner at every log
// position (docs/internals/metastore.md §6).
//
// Replication invariants (docs/internals/replication.md §1), kept by every op that writes an
// assignment: Replicas are distinct and Replicas[0] is the preferred leader; Owner ∈ ISR ⊆
// Replicas; LeaderEpoch never goes backwards and is bumped by every change of Owner. A
// single-replica assignment (every R = 1 partition) is stored with Replicas and ISR omitted,
// exactly as before they existed, so they read as [Owner]: use ReplicaSet and InSync, never
// the fields directly.
//
// TargetReplicas is a replica move in flight (docs/internals/replication.md §9): the ordered
// replica list the partition ends with, set by op 25 (the balance planner's first step, which
// also adds the destinations). When stored it is RF distinct replicas, all in Replicas and
// not equal to it: every write that breaks this clears it (canonical), so the move's last
// step (op 25 with Replicas = TargetReplicas) or the dropping of a destination ends it.
// Omitted while empty, so every other record is stored as before.
type Assignment struct {
	Topic       string   `json:"topic"`
	Partition   int      `json:"partition"`
	Owner       string   `json:"owner_id"`
	Target      string   `json:"target_id,omitempty"`
	Replicas    []string `json:"replicas,omitempty"`
	LeaderEpoch uint64   `json:"leader_epoch,omitempty"`
	ISR         []string `json:"isr,omitempty"`
	// TargetReplicas: see above; read it through MoveTarget.
	TargetReplicas []string `json:"target_replicas,omitempty"`
}

// Member statuses as stored. Draining is a separate flag (docs/internals/metastore.md §6).
const (
	MemberAlive = "alive"
	MemberDead  = "dead"
)

// Member is one node's record. Draining survives re-registration.
type Member struct {
	ID            string `json:"id"`
	Addr          string `json:"addr"`         // HTTP host:port
	ClusterAddr   string `json:"cluster_addr"` // node RPC + Raft host:port
	Status        string `json:"status"`
	LastHeartbeat int64  `json:"last_heartbeat"` // Unix seconds, proposer's clock
	Draining      bool   `json:"draining"`
	// Rack is the member's failure domain (docs/internals/replication.md §3); "" = a rack of
	// its own (its ID). Placement only; no routing rule reads it.
	Rack string `json:"rack,omitempty"`
	// Stopping: the member began a controlled shutdown (docs/internals/replication.md §9). Each
	// heartbeat (op 7) states it, so the first heartbeat of a restarted node clears it, as does
	// op 6. Election planners never pick a stopping member. Omitted while false.
	Stopping bool `json:"stopping,omitempty"`
}

// Grant actions (docs/internals/http-api.md §1.3).
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
	ActionCreate  = "create"
	ActionAdmin   = "admin"
)

// Grant allows Action on topics matching any of Patterns (a trailing '*' is a prefix match).
type Grant struct {
	Action   string   `json:"action"`
	Patterns []string `json:"patterns,omitempty"`
}

// User is a stored account. PasswordHash is bcrypt and never leaves the server.
type User struct {
	Username     string  `json:"username"`
	PasswordHash string  `json:"password_hash"`
	Grants       []Grant `json:"grants,omitempty"`
	Root         bool    `json:"root,omitempty"`
	CreatedAtMs  int64   `json:"created_at_ms,omitempty"`
	UpdatedAtMs  int64   `json:"updated_at_ms,omitempty"`
}

// Schema is one registered JSON Schema version of a topic.
type Schema struct {
	Topic   string          `json:"topic"`
	Version uint32          `json:"version"`
	Doc     json.RawMessage `json:"doc"`
}

// Sentinel errors returned by proposals and reads; the API maps them to status codes in one place.
var (
	ErrNotFound = errcode.ErrNotFound // 404
	ErrExists   = errcode.ErrExists   // 409
	ErrConflict = errcode.ErrConflict // 409
	ErrInvalid  = errcode.ErrInvalid  // 400
	ErrNoLeader = errcode.ErrNoLeader // 503, outcome unknown for proposals
	ErrTimeout  = errcode.ErrTimeout  // 503
	ErrClosed   = errcode.ErrClosed   // 503
	// The refusals of the replication ops (23–25); both are kinds of ErrConflict (409).
	ErrStaleEpoch    = errcode.ErrStaleEpoch
	ErrBadReplicaSet = errcode.ErrBadReplicaSet
)
