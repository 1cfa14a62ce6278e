package service

import "encoding/json"

// CreateTopicRequest is a validated create body. Zero numeric fields mean "server default";
// RetentionMs nil means default, 0 means keep forever.
type CreateTopicRequest struct {
	Name                      string
	Partitions                int
	RetentionMs               *int64
	VisibilityTimeoutMs       int64
	MaxInFlightPerPartition   int64
	MaxAckedAheadPerPartition int64
	Schema                    json.RawMessage // nil = none; already checked to be a valid JSON Schema
	Parent                    string
	FanoutDelayMs             int64
	Owner                     string // the caller's username; "" when security is off
	// ReplicationFactor (0 = the cluster default), MinInsyncReplicas (0 = min(2, R)) and
	// UncleanLeaderElection of a replicated topic (docs/replication.md).
	ReplicationFactor     int
	MinInsyncReplicas     int
	UncleanLeaderElection bool
}

// AlterTopicRequest is a validated PATCH body; nil / zero means "not supplied"
// (for the *int64 limits, a pointer to 0 means "reset to the server default").
type AlterTopicRequest struct {
	Partitions                int
	RetentionMs               *int64
	VisibilityTimeoutMs       *int64
	MaxInFlightPerPartition   *int64
	MaxAckedAheadPerPartition *int64
	Schema                    json.RawMessage
	// Replication settings (docs/replication.md): R 1 … 5 (changes only within 2 … 5), M 0
	// (default min(2, R)) … R, unclean election. nil = not supplied.
	ReplicationFactor     *int  `json:",omitempty"`
	MinInsyncReplicas     *int  `json:",omitempty"`
	UncleanLeaderElection *bool `json:",omitempty"`
}

// ChangesReplication reports whether r supplies any replication setting.
func (r AlterTopicRequest) ChangesReplication() bool {
	return r.ReplicationFactor != nil || r.MinInsyncReplicas != nil || r.UncleanLeaderElection != nil
}

// PartitionStats is one entry of a describe's partition_stats.
type PartitionStats struct {
	Index           int    `json:"index"`
	OwnerNode       string `json:"owner_node"`
	TargetNode      string `json:"target_node,omitempty"`
	Available       bool   `json:"available"`
	Segments        int    `json:"segments"`
	OldestOffset    int64  `json:"oldest_offset"`
	NextOffset      int64  `json:"next_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	SizeBytes       int64  `json:"size_bytes"`
	OldestSegmentAt int64  `json:"oldest_segment_at,omitempty"` // Unix seconds
	// A replicated partition (docs/replication.md): its replicas (preferred leader first), its
	// leader (the owner), the leader epoch, the in-sync replicas and, when the leader answered,
	// each follower's lag in records.
	Replicas    []string         `json:"replicas,omitempty"`
	Leader      string           `json:"leader,omitempty"`
	LeaderEpoch *uint64          `json:"leader_epoch,omitempty"` // set for a replicated partition, 0 included
	ISR         []string         `json:"isr,omitempty"`
	FollowerLag map[string]int64 `json:"follower_lag,omitempty"`
}
