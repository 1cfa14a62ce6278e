package api

import (
	"encoding/json"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// TopicObject is the Topic object of docs/internals/http-api.md §2.1 as it goes on the wire (create, list,
// get, alter, and the lead's attach). Internal fields of meta.Topic (incarnation, schema
// version) are not part of it.
type TopicObject struct {
	Name                      string   `json:"name"`
	Partitions                int      `json:"partitions"`
	RetentionMs               int64    `json:"retention_ms"`
	VisibilityTimeoutMs       int64    `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   int64    `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition int64    `json:"max_acked_ahead_per_partition"`
	CreatedAt                 int64    `json:"created_at"`
	Owner                     string   `json:"owner,omitempty"`
	Role                      string   `json:"role"`
	Children                  []string `json:"children,omitempty"`
	Parent                    string   `json:"parent,omitempty"`
	AttachEpoch               string   `json:"attach_epoch,omitempty"`
	AttachOffsets             []int64  `json:"attach_offsets,omitempty"`
	FanoutDelayMs             int64    `json:"fanout_delay_ms,omitempty"`
	ReplicationFactor         int      `json:"replication_factor"`
	MinInsyncReplicas         int      `json:"min_insync_replicas"`
	UncleanLeaderElection     bool     `json:"unclean_leader_election"`
}

// TopicObjectOf converts a stored topic to its wire form; an empty role reads as
// "standalone" (role is always present).
func TopicObjectOf(t meta.Topic) TopicObject {
	role := t.Role
	if role == "" {
		role = meta.RoleStandalone
	}
	return TopicObject{
		Name:                      t.Name,
		Partitions:                t.Partitions,
		RetentionMs:               t.RetentionMs,
		VisibilityTimeoutMs:       t.VisibilityTimeoutMs,
		MaxInFlightPerPartition:   t.MaxInFlightPerPartition,
		MaxAckedAheadPerPartition: t.MaxAckedAheadPerPartition,
		CreatedAt:                 t.CreatedAt,
		Owner:                     t.Owner,
		Role:                      role,
		Children:                  t.Children,
		Parent:                    t.Parent,
		AttachEpoch:               t.AttachEpoch,
		AttachOffsets:             t.AttachOffsets,
		FanoutDelayMs:             t.FanoutDelayMs,
		ReplicationFactor:         t.RF(),
		MinInsyncReplicas:         t.MinISR(),
		UncleanLeaderElection:     t.UncleanLeaderElection,
	}
}

// describeObject is the answer of GET /v1/topics/{topic}: the Topic object plus
// partition_stats (always present, sorted by index) and the topic's incarnation, which
// changes when a topic of the same name is deleted and created again (an addition of ours,
// docs/internals/http-api.md §6).
type describeObject struct {
	TopicObject
	Incarnation    string                   `json:"incarnation"`
	PartitionStats []service.PartitionStats `json:"partition_stats"`
}

// topicList is the answer of GET /v1/topics; Topics is never null.
type topicList struct {
	Topics        []TopicObject `json:"topics"`
	NextPageToken string        `json:"next_page_token"`
}

// createTopicBody is the strict request body of POST /v1/topics (docs/internals/http-api.md §2.2). RetentionMs is
// a pointer: absent = server default, 0 = keep forever (Open point 6).
type createTopicBody struct {
	Name                      string          `json:"name"`
	Partitions                int             `json:"partitions"`
	RetentionMs               *int64          `json:"retention_ms"`
	VisibilityTimeoutMs       int64           `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   int64           `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition int64           `json:"max_acked_ahead_per_partition"`
	Schema                    json.RawMessage `json:"schema"`
	Parent                    string          `json:"parent"`
	FanoutDelayMs             int64           `json:"fanout_delay_ms"`
	Owner                     string          `json:"owner"`                   // accepted and ignored (docs/internals/http-api.md §2.2)
	ReplicationFactor         int             `json:"replication_factor"`      // 0 = the cluster default
	MinInsyncReplicas         int             `json:"min_insync_replicas"`     // 0 = min(2, R)
	UncleanLeaderElection     bool            `json:"unclean_leader_election"` // default false
}

// alterTopicBody is the strict request body of PATCH /v1/topics/{topic} (docs/internals/http-api.md §2.5). Any
// field outside this set (name, parent, fanout_delay_ms, ...) is an unknown field → 400.
// null counts as not supplied.
type alterTopicBody struct {
	Partitions                *int            `json:"partitions"`
	RetentionMs               *int64          `json:"retention_ms"`
	VisibilityTimeoutMs       *int64          `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   *int64          `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition *int64          `json:"max_acked_ahead_per_partition"`
	Schema                    json.RawMessage `json:"schema"`
	ReplicationFactor         *int            `json:"replication_factor"`
	MinInsyncReplicas         *int            `json:"min_insync_replicas"`
	UncleanLeaderElection     *bool           `json:"unclean_leader_election"`
}
