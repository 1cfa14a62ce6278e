package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/transfer"
)

// Backend is the service layer the HTTP handlers call (handler → service → log). It is
// implemented by narad.dev/broker/internal/engine. Handlers do all syntactic validation
// (400/413) and authorization (401/403) before calling it; the Backend reports state
// errors with the sentinels in errors.go (wrapped with %w), which handlers map to statuses in
// one place (statusOf).
//
// Every method is safe for concurrent use.
type Backend interface {
	// CreateTopic validates state (existence, parent rules) and proposes the topic. The request
	// has already passed field validation; defaults are applied by the Backend.
	CreateTopic(ctx context.Context, req service.CreateTopicRequest) (meta.Topic, error)
	// ListTopics returns up to limit topics with name > after, ascending, and the token of the
	// next page ("" when there is none).
	ListTopics(after string, limit int) (topics []meta.Topic, next string)
	// Topic reads one topic from the local replica.
	Topic(name string) (meta.Topic, bool)
	// PartitionStats describes partitions of t (all when partition < 0) without opening
	// closed logs or refreshing idle timers.
	PartitionStats(ctx context.Context, t meta.Topic, partition int) []service.PartitionStats
	// AlterTopic applies every supplied change atomically or none.
	AlterTopic(ctx context.Context, name string, req service.AlterTopicRequest) (meta.Topic, error)
	// DeleteTopic removes the topic's metadata and data.
	DeleteTopic(ctx context.Context, name string) error
	// ValidatePayload checks payload against t's current schema (nil if t has none); a
	// violation is returned wrapping ErrSchema.
	ValidatePayload(t meta.Topic, payload []byte) error

	// Produce durably accepts recs (all or nothing, one fsync) into the ingress WAL.
	// Returns ErrDraining / ErrUnavailable (503).
	Produce(ctx context.Context, t meta.Topic, recs []service.ProduceRecord) error
	// Consume serves queue, pinned-queue and replay reads (see ConsumeRequest). An empty
	// result means 204. The messages returned hold part of the node's answer budget until
	// ReleaseAnswer is called with all of them, once the answer is written; a spent budget
	// refuses with ErrBusy (503, Retry-After).
	Consume(ctx context.Context, t meta.Topic, req service.ConsumeRequest) ([]service.Message, error)
	// ReleaseAnswer gives back the answer budget of everything one Consume returned.
	ReleaseAnswer(msgs []service.Message)
	// Requeue ends at once the leases of messages Consume returned that could not be
	// written to the consumer, so they are delivered again without waiting for their
	// visibility timeout.
	Requeue(t meta.Topic, msgs []service.Message)
	// Ack applies each entry independently; the result slice has one error (nil = 204) per
	// entry, in order: ErrStale (410), ErrAckedAheadFull (503), ErrUnavailable (503).
	Ack(ctx context.Context, t meta.Topic, entries []service.AckEntry) []error

	// CreateUser stores u (PasswordHash already set). ErrExists → 409.
	CreateUser(ctx context.Context, u meta.User) error
	// User reads one user from the local replica.
	User(name string) (meta.User, bool)
	// Users lists every user sorted by username.
	Users() []meta.User
	// UpdateUser replaces the stored user record (grants or password hash). ErrNotFound → 404.
	UpdateUser(ctx context.Context, u meta.User) error
	// DeleteUser removes a user. ErrNotFound → 404.
	DeleteUser(ctx context.Context, name string) error

	// Ready is nil when the node can accept produce and serve its partitions (/readyz).
	Ready() error
	// ShuttingDown is true once graceful shutdown has begun (/healthz → 503).
	ShuttingDown() bool
}

// Authenticator checks the request's credentials. It returns the user, or an error wrapping
// ErrUnauthenticated (401), ErrThrottled (429) or any other error (500). It is not called when
// security is off.
type Authenticator interface {
	Authenticate(r *http.Request) (*meta.User, error)
}

// HTTPObserver receives one call per finished request (metrics). route is the matched
// pattern, e.g. "GET /v1/topics/{topic}", or "unmatched"; method is the request method when
// it is a known one, else "other": neither is ever a client-chosen string.
type HTTPObserver interface {
	ObserveRequest(route, method string, status int, d time.Duration, bytesIn, bytesOut int64)
	InFlight(delta int)
}

// SchemaReader is optionally implemented by a Backend. When it is, PATCH checks a new
// schema's backward compatibility (schema.CheckCompatible, 400) in the handler, right after
// the partition-bound check (docs/internals/http-api.md §2.5 check order); otherwise that check is left to
// Backend.AlterTopic, which must then return an error wrapping ErrInvalid.
type SchemaReader interface {
	// Schema returns the latest registered JSON Schema document of the topic; ok is false
	// when it has none.
	Schema(topic string) (doc json.RawMessage, ok bool)
}

// ReplicaStatus is optionally implemented by a Backend. ReplicaCurrent reports whether the
// node's metadata replica is current (the node finished booting and is caught up with the
// leader), so that "no such topic" is an authoritative answer. While it is false, a topic
// missing from the replica answers 503 (retry), never 404: a restarting or lagging node must
// not deny a topic that exists.
type ReplicaStatus interface {
	ReplicaCurrent() bool
	// AwaitTopic is asked for a topic the local replica does not have: a follower checks
	// with the leader and, when the topic exists there, waits briefly for its own replica.
	AwaitTopic(ctx context.Context, name string) (meta.Topic, bool)
}

// topic reads a topic from the local replica, or, when the replica lacks it, through
// ReplicaStatus.AwaitTopic (a create applied on the leader moments ago).
func (s *server) topic(ctx context.Context, name string) (meta.Topic, bool) {
	if t, ok := s.be.Topic(name); ok {
		return t, true
	}
	if rs, ok := s.be.(ReplicaStatus); ok {
		return rs.AwaitTopic(ctx, name)
	}
	return meta.Topic{}, false
}

// topicMissing is the error for a topic the local replica does not have: 404, or 503 while
// the replica is not current.
func (s *server) topicMissing(name string) error {
	if rs, ok := s.be.(ReplicaStatus); ok && !rs.ReplicaCurrent() {
		return fmt.Errorf("%w: this node is still catching up with the cluster and cannot tell whether topic %q exists yet; retry", ErrUnavailable, name)
	}
	return notFoundf("topic %q not found", name)
}

// ClusterBackend is the service layer of the /v1/cluster endpoints (docs/internals/http-api.md §2.16–§2.19).
// Reads come from this node's replica; writes go to the leader. The handlers parse, validate
// and authorize; every decision (a move's blocked reasons, the abort algorithm, where a
// decommission runs) is the ClusterBackend's. Errors wrap the sentinels of errors.go (a
// *ClusterError or *AbortUnknownError carries the exact message and body fields).
//
// Every method is safe for concurrent use.
type ClusterBackend interface {
	// Members lists every member, sorted by ID, with the leader's decommission evaluation
	// when the leader can be asked.
	Members(ctx context.Context) MemberList
	// Moves lists every assignment with a target, sorted by topic then partition; with
	// detail, each destination's report (or why it could not be asked).
	Moves(ctx context.Context, detail bool) []Move
	// AbortMove clears the move of topic/partition when its target is target ("" = any).
	// It answers the move it aborted, or ErrNotFound (404), a *ClusterError of ErrConflict
	// (409, owner and target fields) or an *AbortUnknownError (503).
	AbortMove(ctx context.Context, topic string, partition int, target string) (AbortedMove, error)
	// Decommission starts, dry-runs or cancels a member's decommission on the leader.
	Decommission(ctx context.Context, req DecommissionRequest) (DecommissionResult, error)
	// Partitions lists every partition's replica set from this node's replica, in any
	// order, with UnderReplicated and UnderMinISR decided (docs/internals/http-api.md §2.21).
	Partitions(ctx context.Context) []PartitionReplicas
}

// Member statuses of the cluster endpoints (docs/internals/http-api.md §2.16, §2.18).
const (
	MemberAlive     = "alive"
	MemberDead      = "dead"
	MemberDraining  = "draining"
	MemberNotMember = "not_a_member"
	// MemberRemoved is a decommissioned member: out of the Raft configuration, draining and
	// owning nothing. Its record is garbage-collected once it has been dead for
	// controller.DefaultRemoveDeadAfter (1 h); one that keeps running stays listed.
	MemberRemoved = "removed"
)

// Member is one entry of GET /v1/cluster/members (docs/internals/http-api.md §2.16).
type Member struct {
	ID                  string   `json:"id"`
	Addr                string   `json:"addr"`
	ClusterAddr         string   `json:"cluster_addr"`
	Status              string   `json:"status"`
	Draining            bool     `json:"draining"`
	RaftRole            string   `json:"raft_role"`
	Leader              bool     `json:"leader"`
	OwnedPartitions     int      `json:"owned_partitions"`
	OutboundMoves       int      `json:"outbound_moves"`
	LastHeartbeat       int64    `json:"last_heartbeat"`
	Rack                string   `json:"rack,omitempty"` // --rack; omitted when none
	DecommissionBlocked []string `json:"decommission_blocked,omitzero"`
}

// MemberList is the body of GET /v1/cluster/members.
type MemberList struct {
	Members         []Member `json:"members"`
	LeaderReachable bool     `json:"leader_reachable"`
	Leader          string   `json:"leader,omitempty"`
}

// Move is one entry of GET /v1/cluster/moves (docs/internals/http-api.md §2.18).
type Move struct {
	Topic       string           `json:"topic"`
	Partition   int              `json:"partition"`
	From        string           `json:"from"`
	To          string           `json:"to"`
	FromStatus  string           `json:"from_status"`
	ToStatus    string           `json:"to_status"`
	Blocked     []string         `json:"blocked"`
	Detail      *transfer.Report `json:"detail,omitempty"`
	DetailError string           `json:"detail_error,omitempty"`
	// A replica move of a replicated partition (docs/internals/replication.md §9) also
	// lists the partition's replicas, its ISR and the replicas it ends with; From is the
	// replica that leaves, To the one that joins. Omitted for single-replica moves.
	Replicas       []string `json:"replicas,omitempty"`
	ISR            []string `json:"isr,omitempty"`
	TargetReplicas []string `json:"target_replicas,omitempty"`
}

// Reasons a move is blocked (docs/internals/http-api.md §2.18).
const (
	BlockedSourceDead      = "source_dead"
	BlockedTargetDead      = "target_dead"
	BlockedTargetNotMember = "target_not_member"
)

// AbortedMove is the move an abort cleared: the partition, its (unchanged) owner and the
// target that is no longer moved to.
type AbortedMove struct {
	Topic     string
	Partition int
	Owner     string
	Target    string
}

// DecommissionRequest is a parsed decommission call: start (DryRun: only evaluate), Cancel,
// or, with Force set, start the decommission of a dead node giving up its single-replica
// partitions (docs/internals/replication.md §9).
type DecommissionRequest struct {
	ID     string
	DryRun bool
	Cancel bool
	Force  *ForceDecommission // nil: not forced
}

// ForceDecommission is the forced part of a decommission: Lose must name every
// single-replica partition of the dead node.
type ForceDecommission struct {
	Lose []controller.PartitionRef
}

// DecommissionResult is a decommission that succeeded. Evaluated is set when the answer is a
// dry run's verdict (200 with the verdict); Forced when it is a forced decommission's (200,
// Verdict.Lost lists what was given up); otherwise the change was made (204).
type DecommissionResult struct {
	Evaluated bool
	Forced    bool
	Verdict   controller.Verdict
}

// ClusterError is a refusal of a cluster endpoint: Msg is the whole message shown, Kind (a
// sentinel of errors.go) fixes the status, Fields are added to the error body.
type ClusterError struct {
	Kind   error
	Msg    string
	Fields map[string]any
}

func (e *ClusterError) Error() string { return e.Msg }
func (e *ClusterError) Unwrap() error { return e.Kind }

// ErrorFields adds Fields to the error body.
func (e *ClusterError) ErrorFields() map[string]any { return e.Fields }

// AbortUnknownError is an abort whose outcome is unknown (503, retry): the step that failed,
// the move it was aimed at, and the cause.
type AbortUnknownError struct {
	Step   string // "propose" or "leader read back"
	Owner  string
	Target string
	Err    error
}

func (e *AbortUnknownError) Error() string {
	return fmt.Sprintf("abort outcome unknown (%s): %v", e.Step, e.Err)
}
func (e *AbortUnknownError) Unwrap() error { return ErrUnavailable }
