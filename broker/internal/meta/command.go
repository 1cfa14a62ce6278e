package meta

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Op numbers of the replicated commands (docs/internals/metastore.md §7). Values are append-only: a
// number is never reused or renumbered.
const (
	OpCreateTopic         uint8 = 1
	OpUpdateTopic         uint8 = 2
	OpDeleteTopic         uint8 = 3
	OpPutSchema           uint8 = 4
	OpAssignPartition     uint8 = 5
	OpMemberJoin          uint8 = 6
	OpMemberHeartbeat     uint8 = 7
	OpMemberDead          uint8 = 8
	OpCreateUser          uint8 = 9
	OpUpdateUser          uint8 = 10
	OpDeleteUser          uint8 = 11
	OpSeedRootUser        uint8 = 12
	OpAttachChild         uint8 = 13
	OpDetachChild         uint8 = 14
	OpSetAssignmentTarget uint8 = 15
	OpCompleteMove        uint8 = 16
	OpAbortMove           uint8 = 17
	OpSetMemberDraining   uint8 = 18
	OpRemoveMember        uint8 = 19
	OpAttachRemote        uint8 = 20
	OpDetachRemote        uint8 = 21
	OpResealRemote        uint8 = 22
	OpSetISR              uint8 = 23
	OpElectLeader         uint8 = 24
	OpSetReplicas         uint8 = 25

	// OpRestore is not a command: Event.Op is OpRestore after a snapshot restore replaced the
	// whole state (every cached view is stale).
	OpRestore uint8 = 0
)

// errBadCommand reports an undecodable command; Apply answers it with OutcomeInvalid.
var errBadCommand = errors.New("meta: bad command")

// envelope is the wire form of every log entry: {"o": op, "d": payload}.
type envelope struct {
	Op      uint8           `json:"o"`
	Payload json.RawMessage `json:"d"`
}

// command is a decoded envelope; payload is one of the *Cmd types below.
type command struct {
	op      uint8
	payload any
}

// AttachSpec is the link part of an attach (op 13) or of a create-as-child (op 1).
type AttachSpec struct {
	Parent  string  `json:"parent"`
	Epoch   string  `json:"epoch"`          // 16 lowercase hex, new on every attach
	DelayMs int64   `json:"delay_ms"`       // 0 … MaxDelayMs; > 0 = delay child
	Offsets []int64 `json:"attach_offsets"` // index = parent partition; parent HWM at attach
}

type createTopicCmd struct {
	Topic       Topic           `json:"topic"`
	Assignments []Assignment    `json:"assignments,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Attach      *AttachSpec     `json:"attach,omitempty"`
}

type updateTopicCmd struct {
	Topic       Topic           `json:"topic"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Assignments []Assignment    `json:"assignments,omitempty"`
	// Replication: take replication_factor, min_insync_replicas and unclean_leader_election
	// from Topic too (docs/internals/replication.md §9). Absent in every older entry, which
	// therefore leaves the stored settings alone.
	Replication bool `json:"replication,omitempty"`
}

type deleteTopicCmd struct {
	Name        string `json:"name"`
	Incarnation string `json:"incarnation,omitempty"`
}

type putSchemaCmd struct {
	Topic string          `json:"topic"`
	Doc   json.RawMessage `json:"doc"`
}

type assignCmd struct {
	Assignment Assignment `json:"assignment"`
}

type memberCmd struct {
	Member Member `json:"member"`
}

type heartbeatCmd struct {
	ID string `json:"id"`
	At int64  `json:"at"`
	// Stopping: the member is in a controlled shutdown; absent (false) clears the flag.
	Stopping bool `json:"stopping,omitempty"`
}

type memberIDCmd struct {
	ID string `json:"id"`
}

type drainCmd struct {
	ID string `json:"id"`
	On bool   `json:"on"`
}

type userCmd struct {
	User User `json:"user"`
}

type userNameCmd struct {
	Username string `json:"username"`
}

type attachCmd struct {
	Child string `json:"child"`
	AttachSpec
}

type detachCmd struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
}

type setTargetCmd struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"p"`
	Target        string `json:"target"`
	ExpectedOwner string `json:"expected_owner"`
}

type completeMoveCmd struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"p"`
	ExpectedOwner string `json:"expected_owner"`
	Target        string `json:"target"`
}

type abortMoveCmd struct {
	Topic          string `json:"topic"`
	Partition      int    `json:"p"`
	ExpectedTarget string `json:"expected_target"`
}

// setISRCmd is op 23: the leader shrinks or expands the ISR under its own epoch.
type setISRCmd struct {
	Topic       string   `json:"topic"`
	Partition   int      `json:"p"`
	LeaderEpoch uint64   `json:"leader_epoch"`
	ExpectedISR []string `json:"expected_isr"`
	NewISR      []string `json:"new_isr"`
}

// Reasons of a leader election (op 24); they are also the reason label of
// narad_leader_elections_total.
const (
	ElectDead      = "dead"      // the leader missed its heartbeats
	ElectShutdown  = "shutdown"  // the leader is stopping (controlled shutdown)
	ElectPreferred = "preferred" // leadership goes back to replicas[0]
	ElectUnclean   = "unclean"   // an out-of-sync replica, where the topic allows it
	ElectReassign  = "reassign"  // the leader leaves the replica set (a reassignment, §9)
)

// electLeaderCmd is op 24: the controller moves leadership and bumps the epoch.
type electLeaderCmd struct {
	Topic         string `json:"topic"`
	Partition     int    `json:"p"`
	ExpectedEpoch uint64 `json:"expected_epoch"`
	NewLeader     string `json:"new_leader"`
	Reason        string `json:"reason"`
}

// setReplicasCmd is op 25: a reassignment replaces the replica list (and trims the ISR).
type setReplicasCmd struct {
	Topic         string   `json:"topic"`
	Partition     int      `json:"p"`
	ExpectedEpoch uint64   `json:"expected_epoch"`
	Replicas      []string `json:"replicas"`
	ISR           []string `json:"isr"`
	// TargetReplicas, when given, records a replica move (Assignment.TargetReplicas), or
	// clears it when equal to Replicas; omitted, the stored target stays unless the new
	// replicas reach or void it.
	TargetReplicas []string `json:"target_replicas,omitempty"`
}

// newPayload returns a pointer to the zero payload of op, nil for an unknown op.
func newPayload(op uint8) any {
	switch op {
	case OpCreateTopic:
		return &createTopicCmd{}
	case OpUpdateTopic:
		return &updateTopicCmd{}
	case OpDeleteTopic:
		return &deleteTopicCmd{}
	case OpPutSchema:
		return &putSchemaCmd{}
	case OpAssignPartition:
		return &assignCmd{}
	case OpMemberJoin:
		return &memberCmd{}
	case OpMemberHeartbeat:
		return &heartbeatCmd{}
	case OpMemberDead, OpRemoveMember:
		return &memberIDCmd{}
	case OpCreateUser, OpUpdateUser, OpSeedRootUser:
		return &userCmd{}
	case OpDeleteUser:
		return &userNameCmd{}
	case OpAttachChild:
		return &attachCmd{}
	case OpDetachChild:
		return &detachCmd{}
	case OpSetAssignmentTarget:
		return &setTargetCmd{}
	case OpCompleteMove:
		return &completeMoveCmd{}
	case OpAbortMove:
		return &abortMoveCmd{}
	case OpSetMemberDraining:
		return &drainCmd{}
	case OpAttachRemote:
		return &attachRemoteCmd{}
	case OpDetachRemote:
		return &detachRemoteCmd{}
	case OpResealRemote:
		return &resealRemoteCmd{}
	case OpSetISR:
		return &setISRCmd{}
	case OpElectLeader:
		return &electLeaderCmd{}
	case OpSetReplicas:
		return &setReplicasCmd{}
	}
	return nil
}

// encodeCommand builds the log entry data of a proposal.
func encodeCommand(op uint8, payload any) ([]byte, error) {
	d, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("meta: encode op %d: %w", op, err)
	}
	return json.Marshal(envelope{Op: op, Payload: d})
}

// decodeCommand parses log entry data. Any error wraps errBadCommand; it never panics.
func decodeCommand(data []byte) (command, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return command{}, fmt.Errorf("%w: envelope: %v", errBadCommand, err)
	}
	p := newPayload(env.Op)
	if p == nil {
		return command{}, fmt.Errorf("%w: unknown op %d", errBadCommand, env.Op)
	}
	if len(env.Payload) == 0 {
		return command{}, fmt.Errorf("%w: op %d: no payload", errBadCommand, env.Op)
	}
	if err := json.Unmarshal(env.Payload, p); err != nil {
		return command{}, fmt.Errorf("%w: op %d payload: %v", errBadCommand, env.Op, err)
	}
	return command{op: env.Op, payload: p}, nil
}
