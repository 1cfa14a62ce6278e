package client

import "encoding/json"

// Topic roles (docs/internals/http-api.md §2.1).
const (
	RoleStandalone = "standalone"
	RoleParent     = "parent"
	RoleChild      = "child"
)

// Topic is the Topic object of docs/internals/http-api.md §2.1, returned by create, list, get, alter and
// attach. Times: CreatedAt is Unix seconds; fields ending in Ms are milliseconds.
type Topic struct {
	Name                      string   `json:"name"`
	Partitions                int      `json:"partitions"`
	RetentionMs               int64    `json:"retention_ms"` // 0 = keep forever
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
	// Replication (docs/replication.md): copies of each partition, the copies a 202 needs,
	// and whether an out-of-sync copy may be elected leader.
	ReplicationFactor     int  `json:"replication_factor,omitempty"`
	MinInsyncReplicas     int  `json:"min_insync_replicas,omitempty"`
	UncleanLeaderElection bool `json:"unclean_leader_election,omitempty"`
}

// PartitionStat is one entry of a topic's partition_stats (§2.4). When Available is false
// the owner could not be asked and the numeric fields are 0.
type PartitionStat struct {
	Index           int    `json:"index"`
	OwnerNode       string `json:"owner_node"`
	TargetNode      string `json:"target_node,omitempty"`
	Available       bool   `json:"available"`
	Segments        int    `json:"segments"`
	OldestOffset    int64  `json:"oldest_offset"`
	NextOffset      int64  `json:"next_offset"`
	HighWatermark   int64  `json:"high_watermark"` // exclusive end of consumer-visible records
	SizeBytes       int64  `json:"size_bytes"`
	OldestSegmentAt int64  `json:"oldest_segment_at,omitempty"` // Unix seconds
	// A replicated partition: its replicas (preferred leader first), leader, leader epoch,
	// in-sync replicas and, when the leader answered, each follower's lag in records.
	Replicas    []string         `json:"replicas,omitempty"`
	Leader      string           `json:"leader,omitempty"`
	LeaderEpoch uint64           `json:"leader_epoch"`
	ISR         []string         `json:"isr,omitempty"`
	FollowerLag map[string]int64 `json:"follower_lag,omitempty"`
}

// TopicDetail is the describe response (§2.4): the Topic object plus per-partition stats
// sorted by index.
type TopicDetail struct {
	Topic
	// Incarnation identifies this life of the topic: it changes when a topic of the same name
	// is deleted and created again.
	Incarnation    string          `json:"incarnation"`
	PartitionStats []PartitionStat `json:"partition_stats"`
}

// TopicList is one page of the topic list (§2.3). NextPageToken is "" on the last page.
type TopicList struct {
	Topics        []Topic `json:"topics"`
	NextPageToken string  `json:"next_page_token"`
}

// CreateTopicRequest is the body of POST /v1/topics (§2.2). Zero values mean "server
// default" except RetentionMs, where nil is the server default and a pointer to 0 means keep
// forever (§5 open point 6).
type CreateTopicRequest struct {
	Name                      string          `json:"name"`
	Partitions                int             `json:"partitions,omitempty"`
	RetentionMs               *int64          `json:"retention_ms,omitempty"`
	VisibilityTimeoutMs       int64           `json:"visibility_timeout_ms,omitempty"`
	MaxInFlightPerPartition   int64           `json:"max_in_flight_per_partition,omitempty"`
	MaxAckedAheadPerPartition int64           `json:"max_acked_ahead_per_partition,omitempty"`
	Schema                    json.RawMessage `json:"schema,omitempty"`
	Parent                    string          `json:"parent,omitempty"`
	FanoutDelayMs             int64           `json:"fanout_delay_ms,omitempty"`         // only with Parent
	ReplicationFactor         int             `json:"replication_factor,omitempty"`      // 0 = the cluster default
	MinInsyncReplicas         int             `json:"min_insync_replicas,omitempty"`     // 0 = min(2, R)
	UncleanLeaderElection     bool            `json:"unclean_leader_election,omitempty"` // default false
}

// AlterTopicRequest is the body of PATCH /v1/topics/{topic} (§2.5). A nil field is not
// supplied; at least one must be set. RetentionMs 0 = keep forever; the other limits reset to
// the server default when set to 0. Partitions may only grow.
type AlterTopicRequest struct {
	Partitions                *int            `json:"partitions,omitempty"`
	RetentionMs               *int64          `json:"retention_ms,omitempty"`
	VisibilityTimeoutMs       *int64          `json:"visibility_timeout_ms,omitempty"`
	MaxInFlightPerPartition   *int64          `json:"max_in_flight_per_partition,omitempty"`
	MaxAckedAheadPerPartition *int64          `json:"max_acked_ahead_per_partition,omitempty"`
	Schema                    json.RawMessage `json:"schema,omitempty"`
	// Replication settings (docs/replication.md): ReplicationFactor 1 … 5, changeable only
	// within 2 … 5; MinInsyncReplicas 0 (default) … R.
	ReplicationFactor     *int  `json:"replication_factor,omitempty"`
	MinInsyncReplicas     *int  `json:"min_insync_replicas,omitempty"`
	UncleanLeaderElection *bool `json:"unclean_leader_election,omitempty"`
}

// Empty reports whether no field is supplied (the server answers such a request with 400).
func (r AlterTopicRequest) Empty() bool {
	return r.Partitions == nil && r.RetentionMs == nil && r.VisibilityTimeoutMs == nil &&
		r.MaxInFlightPerPartition == nil && r.MaxAckedAheadPerPartition == nil && len(r.Schema) == 0 &&
		r.ReplicationFactor == nil && r.MinInsyncReplicas == nil && r.UncleanLeaderElection == nil
}

// attachRequest is the body of POST /v1/topics/{parent}/children (§2.12).
type attachRequest struct {
	Child   string `json:"child"`
	DelayMs int64  `json:"delay_ms,omitempty"`
}

// ChildList is the children listing of a parent (§2.13), in attach order.
type ChildList struct {
	Parent   string      `json:"parent"`
	Children []ChildLink `json:"children"`
}

// ChildLink is one child of a parent with its fan-out lag (§2.13). LagMessages is a lower
// bound when LagComplete is false.
//
// Remote children also carry ID (what Detach takes), Kind "remote", Epoch, Target (the target
// topic), Start, RecoveryPoint (partition index → lowest unadvanced offset) and LastError;
// their State is active, target_unreachable, unauthorized, target_topic_missing, rejected,
// redirect_refused, not_allowed_host, behind_retention or incomplete.
type ChildLink struct {
	Name          string          `json:"name"`
	ID            string          `json:"id,omitempty"`
	Link          string          `json:"link"` // "local" or "remote"
	Kind          string          `json:"kind,omitempty"`
	DelayMs       int64           `json:"delay_ms"`
	AttachEpoch   string          `json:"attach_epoch"`
	Epoch         string          `json:"epoch,omitempty"`
	Target        string          `json:"target,omitempty"`
	Start         string          `json:"start,omitempty"`
	State         string          `json:"state"` // active | stalled | incomplete (remote: see above)
	LagMessages   int64           `json:"lag_messages"`
	LagComplete   bool            `json:"lag_complete"`
	DueLagSeconds float64         `json:"due_lag_seconds,omitempty"`
	Cursors       []ChildCursor   `json:"cursors"`
	RecoveryPoint json.RawMessage `json:"recovery_point,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
}

// RemoteChild is a remote child to attach (docs/internals/fanout.md §13): URL lists the target
// cluster's base URLs, comma-separated (tried in order); Start is "attach" (default),
// "consumer_frontier" or "oldest".
type RemoteChild struct {
	URL      string `json:"url"`
	Topic    string `json:"topic"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
}

// remoteAttachRequest is the remote form of POST /v1/topics/{parent}/children.
type remoteAttachRequest struct {
	Remote  RemoteChild `json:"remote"`
	DelayMs int64       `json:"delay_ms,omitempty"`
	Start   string      `json:"start,omitempty"`
}

// ChildCursor is the fan-out position of one parent partition for a child (§2.13).
type ChildCursor struct {
	ParentPartition int    `json:"parent_partition"`
	OwnerNode       string `json:"owner_node"`
	NextOffset      int64  `json:"next_offset"`
	HighWatermark   int64  `json:"high_watermark"`
}

// Grant actions (docs/internals/http-api.md §1.3).
const (
	ActionProduce = "produce"
	ActionConsume = "consume"
	ActionCreate  = "create"
	ActionAdmin   = "admin"
)

// Grant allows Action on topics matching Patterns (a trailing "*" is a prefix match).
// Patterns is empty for admin.
type Grant struct {
	Action   string   `json:"action"`
	Patterns []string `json:"patterns,omitempty"`
}

// User is the User object of §2.15 (it never carries the password hash).
type User struct {
	Username    string  `json:"username"`
	Grants      []Grant `json:"grants,omitempty"`
	Root        bool    `json:"root,omitempty"`
	CreatedAtMs int64   `json:"created_at_ms,omitempty"` // Unix ms
	UpdatedAtMs int64   `json:"updated_at_ms,omitempty"` // Unix ms
}

// CreateUserRequest is the body of POST /v1/users (§2.15).
type CreateUserRequest struct {
	Username string  `json:"username"`
	Password string  `json:"password"`
	Grants   []Grant `json:"grants,omitempty"`
}

// grantsRequest is the body of PUT /v1/users/{u}/grants; Grants is never null.
type grantsRequest struct {
	Grants []Grant `json:"grants"`
}

// passwordRequest is the body of PUT /v1/users/{u}/password.
type passwordRequest struct {
	NewPassword     string `json:"new_password"`
	CurrentPassword string `json:"current_password,omitempty"`
}

// Member statuses and Raft roles (§2.16).
const (
	StatusAlive    = "alive"
	StatusDead     = "dead"
	StatusDraining = "draining"
	// StatusRemoved is a member whose decommission finished (out of Raft, owning nothing); its
	// record is dropped once it has been dead for an hour.
	StatusRemoved = "removed"
)

// MemberList is the response of GET /v1/cluster/members (§2.16), sorted by id. When
// LeaderReachable is false, every Member's DecommissionBlocked is nil (unknown).
type MemberList struct {
	Members         []Member `json:"members"`
	LeaderReachable bool     `json:"leader_reachable"`
	Leader          string   `json:"leader,omitempty"` // id of the Raft leader the answering node knows
}

// Member is one cluster member (§2.16). DecommissionBlocked is nil when the field was absent
// (leader unreachable: unknown) and empty when nothing blocks a decommission.
type Member struct {
	ID                  string   `json:"id"`
	Addr                string   `json:"addr"`
	Status              string   `json:"status"` // alive | dead | draining
	Draining            bool     `json:"draining"`
	RaftRole            string   `json:"raft_role"` // voter | nonvoter | none
	Leader              bool     `json:"leader"`    // this member leads Raft (as the answering node knows)
	ClusterAddr         string   `json:"cluster_addr,omitempty"`
	OwnedPartitions     int      `json:"owned_partitions"`
	OutboundMoves       int      `json:"outbound_moves"`
	LastHeartbeat       int64    `json:"last_heartbeat"` // Unix seconds
	DecommissionBlocked []string `json:"decommission_blocked,omitempty"`
	Rack                string   `json:"rack,omitempty"` // the node's --rack; "" when none
}

// DecommissionVerdict is the dry-run answer of POST .../decommission?dry_run=true (§2.17).
type DecommissionVerdict struct {
	Node    string   `json:"node"`
	DryRun  bool     `json:"dry_run"`
	Allowed bool     `json:"allowed"`
	Reasons []string `json:"reasons"`
	// Moves are the partition moves the planner would make to drain the node as things stand
	// (not cut to the in-flight budget; other draining nodes stay excluded).
	Moves []PlannedMove `json:"moves"`
}

// PartitionRef names one partition of a topic.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
}

// ForcedDecommission is the answer of a forced decommission (§2.17): exactly the
// single-replica partitions of the dead node it gave up.
type ForcedDecommission struct {
	Node   string          `json:"node"`
	Forced bool            `json:"forced"`
	Lost   []LostPartition `json:"lost"`
}

// LostPartition is one partition a forced decommission gave up: every record Owner held is
// lost, and NewOwner serves it from now on, its log starting empty at RestartsAt (0).
type LostPartition struct {
	Topic       string `json:"topic"`
	Partition   int    `json:"partition"`
	Owner       string `json:"owner"`
	NewOwner    string `json:"new_owner"`
	LeaderEpoch uint64 `json:"leader_epoch"`
	RestartsAt  int64  `json:"restarts_at"`
}

// PlannedMove is one move of a decommission dry run's plan.
type PlannedMove struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// moveList is the response of GET /v1/cluster/moves.
type moveList struct {
	Moves []Move `json:"moves"`
}

// Move is one in-flight partition move (§2.18).
type Move struct {
	Topic       string      `json:"topic"`
	Partition   int         `json:"partition"`
	From        string      `json:"from"`
	To          string      `json:"to"`
	FromStatus  string      `json:"from_status"` // alive | dead | draining | not_a_member
	ToStatus    string      `json:"to_status"`
	Blocked     []string    `json:"blocked"`
	Detail      *MoveDetail `json:"detail,omitempty"`
	DetailError string      `json:"detail_error,omitempty"`
	// Replica moves of replicated partitions (§2.18) only: the replicas now, the ISR and the
	// replicas the move ends with.
	Replicas       []string `json:"replicas,omitempty"`
	ISR            []string `json:"isr,omitempty"`
	TargetReplicas []string `json:"target_replicas,omitempty"`
}

// MoveDetail is the destination's informational report of a move (§2.18); its values may
// evolve and callers must not branch on them.
type MoveDetail struct {
	ReportedBy          string `json:"reported_by,omitempty"`
	Phase               string `json:"phase,omitempty"`
	Passes              int64  `json:"passes,omitempty"`
	CopiedBytes         int64  `json:"copied_bytes,omitempty"`
	SourceHighWatermark int64  `json:"source_high_watermark,omitempty"`
	CopyNextOffset      int64  `json:"copy_next_offset,omitempty"`
	BlockedReason       string `json:"blocked_reason,omitempty"`
	LastError           string `json:"last_error,omitempty"`
	StartedAt           int64  `json:"started_at,omitempty"` // Unix seconds
}

// AbortResult is the 202 body of a move abort (§2.19).
type AbortResult struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"partition"`
	Owner         string `json:"owner"`
	AbortedTarget string `json:"aborted_target"`
}

// healthBody is the body of /healthz and /readyz.
type healthBody struct {
	Status string `json:"status"`
}
