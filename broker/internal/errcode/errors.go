package errcode

import "errors"

// State errors of the metastore and of the service (the metastore's own names are aliases of
// these, so one mapping covers both). The HTTP status of each is in http.go.
var (
	ErrNotFound = errors.New("not found")         // 404
	ErrExists   = errors.New("already exists")    // 409
	ErrConflict = errors.New("conflict")          // 409
	ErrInvalid  = errors.New("invalid")           // 400
	ErrNoLeader = errors.New("no raft leader")    // 503, outcome unknown for proposals
	ErrTimeout  = errors.New("metastore timeout") // 503
	ErrClosed   = errors.New("metastore closed")  // 503
	// ErrNotLeader: this node is not the Raft leader (421 on the node RPC; it has no HTTP
	// status of its own: a follower forwards instead).
	ErrNotLeader = errors.New("not the raft leader")
)

// Errors of the service a client sees through the HTTP API.
var (
	ErrSchema          = errors.New("schema violation")                        // 400
	ErrDelayedChild    = errors.New("topic is a delay child")                  // 409
	ErrDraining        = errors.New("node is draining")                        // 503
	ErrUnavailable     = errors.New("unavailable")                             // 503
	ErrOwnerDown       = errors.New("partition owner is down")                 // 503
	ErrStale           = errors.New("no live reservation")                     // 410
	ErrAckedAheadFull  = errors.New("acked-ahead window full")                 // 503
	ErrGone            = errors.New("offset aged out or unreadable")           // 410
	ErrUnauthenticated = errors.New("authentication required")                 // 401
	ErrThrottled       = errors.New("too many failed authentication attempts") // 429
	ErrForbidden       = errors.New("forbidden")                               // 403
	ErrTooLarge        = errors.New("request body too large")                  // 413
	ErrBusy            = errors.New("memory budget exhausted")                 // 503 with Retry-After
	ErrTargetCheck     = errors.New("remote target check failed")              // 422
	// ErrNotEnoughMembers: a replication factor above the live members that may hold a
	// replica (docs/internals/replication.md §3).
	ErrNotEnoughMembers = errors.New("not enough members") // 422
)

// Errors of the node-to-node plane.
var (
	// ErrNotOwner: this node does not own the partition (421 on the node RPC).
	ErrNotOwner = errors.New("not the partition owner")
	// ErrTopicGone: the topic (or this incarnation of it) does not exist in the local replica
	// (404 on the node RPC).
	ErrTopicGone = errors.New("topic or incarnation gone")
	// ErrFreezeLapsed, ErrUnknownToken and ErrHWMMismatch are the 409s of a move's re-arm or
	// fence of a partition move; their texts are also their reason codes on the wire.
	ErrFreezeLapsed = errors.New("freeze_lapsed")
	ErrUnknownToken = errors.New("unknown_token")
	ErrHWMMismatch  = errors.New("hwm_mismatch")
)

// Sub returns a new sentinel with its own identity and message that is also a kind of kind:
// errors.Is(Sub(msg, kind), kind) is true, so the tables here map it as kind, while its own
// package can still tell it apart. Packages below the service use it for their sentinels,
// and the node RPC service for the refusals whose whole text it fixes itself.
func Sub(msg string, kind error) error {
	return &subError{msg: msg, kind: kind}
}

type subError struct {
	msg  string
	kind error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.kind }

// Refusals of the metastore's replication ops (docs/internals/replication.md §2). Both are
// kinds of ErrConflict (409: the caller re-reads the assignment and decides again), so a
// caller that only knows ErrConflict still branches right.
var (
	// ErrStaleEpoch: the command named a leader epoch that is no longer the partition's.
	ErrStaleEpoch = Sub("stale leader epoch", ErrConflict)
	// ErrBadReplicaSet: the replica set or ISR asked for breaks the assignment's invariants
	// (leader ∈ ISR ⊆ replicas; only the leader adds to the ISR; the new leader is in sync).
	ErrBadReplicaSet = Sub("bad replica set", ErrConflict)
)

// ErrNotEnoughReplicas: a replicated partition's ISR is below its min_insync_replicas, so no
// record can be committed now (docs/internals/replication.md §4). A kind of ErrUnavailable
// (503): produces retry or go to another partition; consumes are unaffected.
var ErrNotEnoughReplicas = Sub("not enough in-sync replicas", ErrUnavailable)

// ErrRefused: the cluster's safety rules refuse the operation as asked (409 on the node RPC;
// no HTTP status of its own). The controller's decommission refusals are kinds of it.
var ErrRefused = errors.New("refused")
