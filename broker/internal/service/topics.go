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
}
