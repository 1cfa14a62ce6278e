package errcode

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reason is the stable code that names a sentinel in a node-RPC reply's reason field. The
// codes are part of the wire format: never rename one.
type Reason string

// nodeRow is one sentinel on the node RPC: its reason code and the reply status it travels
// with (HTTP vocabulary; 421 means "not the owner / not the leader").
type nodeRow struct {
	err    error
	reason Reason
	status int32
}

// nodeTable is the error ↔ node-RPC reply table. A sentinel absent from it, or not spoken by
// the Plane of the op, travels as a 503 without a reason.
var nodeTable = []nodeRow{
	{ErrNotOwner, "not_owner", 421},
	{ErrNotLeader, "not_leader", 421},
	{ErrOwnerDown, "owner_down", 421},
	{ErrTopicGone, "topic_gone", 404},
	{ErrNotFound, "not_found", 404},
	{ErrInvalid, "invalid", 400},
	{ErrSchema, "schema", 400},
	{ErrStale, "stale", 410},
	{ErrGone, "gone", 410},
	{ErrStaleEpoch, "stale_epoch", 409},
	{ErrBadReplicaSet, "bad_replica_set", 409},
	{ErrConflict, "conflict", 409},
	{ErrExists, "exists", 409},
	{ErrRefused, "refused", 409},
	// The fence refusals' codes are the texts they had on the wire before the table existed.
	{ErrFreezeLapsed, "freeze_lapsed", 409},
	{ErrUnknownToken, "unknown_token", 409},
	{ErrHWMMismatch, "hwm_mismatch", 409},
	{ErrAckedAheadFull, "acked_ahead_full", 503},
	{ErrNotEnoughReplicas, "not_enough_replicas", 503},
}

// rowOf returns the table row of sentinel s.
func rowOf(s error) (nodeRow, bool) {
	for _, r := range nodeTable {
		if r.err == s {
			return r, true
		}
	}
	return nodeRow{}, false
}

// rowByReason returns the table row named by a reply's reason.
func rowByReason(reason string) (nodeRow, bool) {
	for _, r := range nodeTable {
		if string(r.reason) == reason {
			return r, true
		}
	}
	return nodeRow{}, false
}

// ReasonOf returns the reason code of sentinel s ("" when s has none).
func ReasonOf(s error) Reason {
	r, _ := rowOf(s)
	return r.reason
}

// A Plane is one family of node-RPC ops that speaks the same subset of the table: the owner
// answers with Reply, the caller reads the answer with Error. A Plane is immutable.
type Plane struct {
	who      string          // who answered, for a reply without a message
	sends    []error         // sentinels answered with their own status and reason, in match order
	as       map[error]error // what a sent sentinel reads as on the caller's side, when not itself
	byStatus map[int32]error // how a reply without a reason (an older peer) is read
	fallback error           // any other non-2xx status
}

// The planes of the node RPC (op numbers of docs/internals/node-rpc.md).
var (
	// Data: the data-plane ops a partition owner answers (ops 8, 11, 17, 29, 30 and the whole
	// reply of 31). A topic gone from the owner's replica reads as not found.
	Data = &Plane{who: "peer", fallback: ErrUnavailable,
		sends: []error{ErrNotOwner, ErrTopicGone, ErrNotFound, ErrInvalid, ErrStale, ErrGone, ErrConflict, ErrExists,
			ErrAckedAheadFull, ErrNotEnoughReplicas},
		as:       map[error]error{ErrTopicGone: ErrNotFound},
		byStatus: map[int32]error{400: ErrInvalid, 404: ErrNotFound, 409: ErrConflict, 410: ErrGone, 421: ErrNotOwner}}
	// Consume (op 2) is Data, plus: a partition whose owner is down is a 421 too, because the
	// owner side never forwards; the caller reads it as not the owner. A leader epoch the owner
	// does not lead under travels as stale_epoch (docs/internals/replication.md §7), ahead of
	// ErrConflict, of which it is a kind.
	Consume = Data.with(func(p *Plane) {
		p.sends = append([]error{ErrOwnerDown, ErrStaleEpoch}, p.sends...)
		p.as[ErrOwnerDown] = ErrNotOwner
	})
	// AckResult: one entry's result inside an op 31 reply. The caller retries an entry whose
	// partition moved (421, and a stale leader epoch, read as unavailable) and treats every
	// 410 as a stale lease.
	AckResult = Data.with(func(p *Plane) {
		p.as[ErrNotOwner] = ErrUnavailable
		p.sends = append([]error{ErrStaleEpoch}, p.sends...) // ahead of ErrConflict, as for Consume
		p.as[ErrStaleEpoch] = ErrUnavailable                 // a leadership that moved, as a 421
		p.as[ErrGone] = ErrStale
		p.byStatus[410] = ErrStale
		p.byStatus[421] = ErrUnavailable
	})
	// Leader: the ops only the Raft leader serves (4–6, 15, 16, 20, 28, 32). Unknown failures
	// read as "no leader": the outcome of a proposal is unknown. The two replication refusals
	// come before ErrConflict, of which they are kinds, so they travel with their own reason.
	Leader = &Plane{who: "leader", fallback: ErrNoLeader,
		sends: []error{ErrNotLeader, ErrNotFound, ErrInvalid, ErrSchema, ErrExists, ErrStaleEpoch, ErrBadReplicaSet,
			ErrConflict},
		as:       map[error]error{},
		byStatus: map[int32]error{400: ErrInvalid, 404: ErrNotFound, 409: ErrConflict, 421: ErrNotLeader}}
	// LeaderCreate is Leader for a create (op 4), whose 409 from an older leader means "exists".
	LeaderCreate = Leader.with(func(p *Plane) { p.byStatus[409] = ErrExists })
	// LeaderRead: a leader-confirmed read (op 28); any failure but "not the leader" is a 503.
	LeaderRead = Leader.with(func(p *Plane) { p.sends = []error{ErrNotLeader} })
	// Source: the source side of a partition move (ops 22–24). The caller retries anything
	// that is not a refusal, a wrong owner or an authoritative absence, a bad request included.
	Source = &Plane{who: "source", fallback: ErrUnavailable,
		sends: []error{ErrFreezeLapsed, ErrUnknownToken, ErrHWMMismatch, ErrNotOwner, ErrTopicGone, ErrNotFound,
			ErrInvalid},
		as:       map[error]error{ErrTopicGone: ErrNotFound, ErrInvalid: ErrUnavailable},
		byStatus: map[int32]error{404: ErrNotFound, 409: ErrFreezeLapsed, 421: ErrNotOwner}}
	// Replica: the ops a replicated partition's leader answers its followers (34, 35). 409 is
	// a stale epoch (the follower looks the assignment up again), 410 a fetch below the
	// leader's log start (the follower copies first), 400 a fetch offset the leader's log does
	// not have (the follower truncates first).
	Replica = &Plane{who: "leader", fallback: ErrUnavailable,
		sends:    []error{ErrStaleEpoch, ErrNotOwner, ErrTopicGone, ErrNotFound, ErrInvalid, ErrGone},
		as:       map[error]error{ErrTopicGone: ErrNotFound},
		byStatus: map[int32]error{400: ErrInvalid, 404: ErrNotFound, 409: ErrStaleEpoch, 410: ErrGone, 421: ErrNotOwner}}
	// Decommission: op 25, whose caller acts on the status itself.
	Decommission = &Plane{who: "leader", fallback: ErrNoLeader,
		sends:    []error{ErrNotFound, ErrRefused, ErrNotLeader},
		as:       map[error]error{},
		byStatus: map[int32]error{404: ErrNotFound, 409: ErrRefused, 421: ErrNotLeader}}
)

// with returns a copy of p changed by edit.
func (p *Plane) with(edit func(*Plane)) *Plane {
	q := &Plane{who: p.who, fallback: p.fallback, sends: append([]error(nil), p.sends...),
		as: make(map[error]error, len(p.as)), byStatus: make(map[int32]error, len(p.byStatus))}
	for k, v := range p.as {
		q.as[k] = v
	}
	for k, v := range p.byStatus {
		q.byStatus[k] = v
	}
	edit(q)
	return q
}

// Reply is the owner side: the status, reason and message of a reply answering err. nil is
// 200; the first sentinel of the plane that err wraps gives its table status and reason;
// anything else is a 503 without a reason (retryable; for a write the outcome is unknown).
func (p *Plane) Reply(err error) (st int32, reason Reason, msg string) {
	if err == nil {
		return 200, "", ""
	}
	for _, s := range p.sends {
		if errors.Is(err, s) {
			r, _ := rowOf(s)
			return r.status, r.reason, err.Error()
		}
	}
	return 503, "", err.Error()
}

// Status is Reply without the reason and message.
func (p *Plane) Status(err error) int32 {
	st, _, _ := p.Reply(err)
	return st
}

// Error is the caller side: nil for a 2xx reply, otherwise a *ReplyError carrying msg (or
// "<who> answered <status>" when it is empty) that wraps the plane's sentinel for the reply.
// A known reason of this plane sent with its own status names the sentinel; a reply without
// one (an older peer) is read by its status alone.
func (p *Plane) Error(st int32, reason, msg string) error {
	if st >= 200 && st < 300 {
		return nil
	}
	if msg == "" {
		msg = fmt.Sprintf("%s answered %d", p.who, st)
	}
	return &ReplyError{msg: msg, kind: p.kind(st, reason)}
}

// kind is the sentinel a non-2xx reply stands for.
func (p *Plane) kind(st int32, reason string) error {
	if r, ok := rowByReason(reason); ok && r.status == st && p.speaks(r.err) {
		if as, ok := p.as[r.err]; ok {
			return as
		}
		return r.err
	}
	if k, ok := p.byStatus[st]; ok {
		return k
	}
	return p.fallback
}

func (p *Plane) speaks(s error) bool {
	for _, x := range p.sends {
		if x == s {
			return true
		}
	}
	return false
}

// ReplyError is a peer's non-2xx answer: its message, classified by a sentinel (Unwrap).
type ReplyError struct {
	msg  string
	kind error
}

func (e *ReplyError) Error() string { return e.msg }
func (e *ReplyError) Unwrap() error { return e.kind }

// TransportStatus maps the transport error of a node RPC (the call's own error, not its
// reply) to the status callers act on: nil → 0 (read the reply's own status); Unimplemented
// → 400 (the peer runs a version without this op); anything else → 503 (retryable; for a
// write the outcome is unknown).
func TransportStatus(err error) int32 {
	if err == nil {
		return 0
	}
	if status.Code(err) == codes.Unimplemented {
		return 400
	}
	return 503
}
