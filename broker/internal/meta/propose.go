package meta

import (
	"context"
	"encoding/json"
	"fmt"
)

// Proposals. Each encodes one command, applies it through Raft (leader only) and maps the
// FSM's Result to the sentinels of types.go: ErrInvalid, ErrNotFound, ErrExists, ErrConflict.
// Raft failures (ErrNotLeader, ErrLeadershipLost, ErrLeadershipTransferInProgress,
// ErrRaftShutdown, ErrEnqueueTimeout, …) wrap ErrNoLeader together with the raft error
// (503, outcome unknown: the entry may still commit); a ctx that ends first, or
// Config.ApplyTimeout passing, returns ErrTimeout (also outcome unknown). Every id and
// timestamp in a command comes from the caller, so Apply stays deterministic. On a follower
// with a Config.Forwarder the proposal is forwarded to the leader (forward.go). When a
// proposal returns, this node's FSM has applied it, so local reads see it (for a forwarded
// one: unless the local apply wait timed out, which is logged).

// TopicCreate is a CreateTopic proposal (op 1).
type TopicCreate struct {
	Topic       Topic           // Incarnation and CreatedAt set by the proposer; link fields ignored
	Assignments []Assignment    // initial placement chosen by the proposer (may be partial or empty)
	Schema      json.RawMessage // optional first schema version (must be JSON)
	Attach      *AttachSpec     // optional: create as a child of Attach.Parent in the same entry
}

// TopicUpdate is an UpdateTopic proposal (op 2).
type TopicUpdate struct {
	// Topic carries the new values of the mutable fields (Partitions: increase only,
	// RetentionMs, VisibilityTimeoutMs, MaxInFlightPerPartition, MaxAckedAheadPerPartition);
	// Name selects the record, and a non-empty Incarnation must match it.
	Topic       Topic
	Schema      json.RawMessage // optional new schema version, atomic with the field changes
	Assignments []Assignment    // optional placements of partitions added by this update
	// Replication also replaces the replication settings with Topic's (R, M, unclean
	// election; docs/internals/replication.md §9). R may change only between 2 and 5: a
	// change from or to 1 is ErrConflict.
	Replication bool
}

func (s *Store) propose(ctx context.Context, op uint8, payload any) (Result, error) {
	if s.closed.Load() {
		return Result{}, ErrClosed
	}
	data, err := encodeCommand(op, payload)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrTimeout, err)
	}
	return s.submit(ctx, data)
}

// CreateTopic proposes a new topic with its initial assignments. ErrExists if the name is
// taken.
func (s *Store) CreateTopic(ctx context.Context, t Topic, as []Assignment) error {
	_, err := s.CreateTopicWith(ctx, TopicCreate{Topic: t, Assignments: as})
	return err
}

// CreateTopicWith proposes a create with optional schema and attach; it returns the stored
// record. Attach refusals (role conflict, 108 children, schema mismatch, retention) are
// ErrConflict and leave no topic behind; a missing parent is ErrNotFound.
func (s *Store) CreateTopicWith(ctx context.Context, c TopicCreate) (Topic, error) {
	//lint:ignore S1016 createTopicCmd is the Raft log format; a field-wise copy lets it diverge from TopicCreate.
	res, err := s.propose(ctx, OpCreateTopic, createTopicCmd{Topic: c.Topic, Assignments: c.Assignments,
		Schema: c.Schema, Attach: c.Attach})
	return res.Topic, err
}

// UpdateTopic replaces the topic's mutable fields with t's (see TopicUpdate).
func (s *Store) UpdateTopic(ctx context.Context, t Topic) error {
	_, err := s.AlterTopic(ctx, TopicUpdate{Topic: t})
	return err
}

// AlterTopic applies a TopicUpdate atomically and returns the record after it. Partition
// decrease → ErrInvalid; retention below a delay child's delay + 1 h, or a schema on an
// attached child → ErrConflict.
func (s *Store) AlterTopic(ctx context.Context, u TopicUpdate) (Topic, error) {
	//lint:ignore S1016 updateTopicCmd is the Raft log format; a field-wise copy lets it diverge from TopicUpdate.
	res, err := s.propose(ctx, OpUpdateTopic, updateTopicCmd{Topic: u.Topic, Schema: u.Schema, Assignments: u.Assignments,
		Replication: u.Replication})
	return res.Topic, err
}

// DeleteTopic deletes the topic, its assignments and schemas (children are detached, a child
// is unlinked) and returns the deleted record.
func (s *Store) DeleteTopic(ctx context.Context, name string) (Topic, error) {
	return s.DeleteTopicIncarnation(ctx, name, "")
}

// DeleteTopicIncarnation deletes the topic only if it is still the given incarnation ("" =
// any); a different incarnation is ErrNotFound.
func (s *Store) DeleteTopicIncarnation(ctx context.Context, name, incarnation string) (Topic, error) {
	res, err := s.propose(ctx, OpDeleteTopic, deleteTopicCmd{Name: name, Incarnation: incarnation})
	return res.Topic, err
}

// PutSchema registers the next schema version of topic (propagated to its children) and
// returns it; a doc equal to the latest version returns that version. An attached child is
// ErrConflict. Compatibility with earlier versions is the caller's check.
func (s *Store) PutSchema(ctx context.Context, topic string, doc json.RawMessage) (uint32, error) {
	res, err := s.propose(ctx, OpPutSchema, putSchemaCmd{Topic: topic, Doc: doc})
	return res.Version, err
}

// AssignPartition sets the owner of an unassigned partition (same owner again: success;
// another owner: ErrExists).
func (s *Store) AssignPartition(ctx context.Context, a Assignment) error {
	_, err := s.propose(ctx, OpAssignPartition, assignCmd{Assignment: a})
	return err
}

// MemberJoin upserts a member as alive, keeping its stored draining flag.
func (s *Store) MemberJoin(ctx context.Context, m Member) error {
	_, err := s.propose(ctx, OpMemberJoin, memberCmd{Member: m})
	return err
}

// MemberHeartbeat stamps last_heartbeat = at (Unix seconds, proposer's clock) and revives a
// dead member. ErrNotFound for an unknown member (register with MemberJoin).
func (s *Store) MemberHeartbeat(ctx context.Context, id string, at int64) error {
	_, err := s.propose(ctx, OpMemberHeartbeat, heartbeatCmd{ID: id, At: at})
	return err
}

// MemberStopping is MemberHeartbeat for a member in a controlled shutdown: it also sets the
// member's stopping flag, which the next plain heartbeat (a restart) clears
// (docs/internals/replication.md §9).
func (s *Store) MemberStopping(ctx context.Context, id string, at int64) error {
	_, err := s.propose(ctx, OpMemberHeartbeat, heartbeatCmd{ID: id, At: at, Stopping: true})
	return err
}

// MemberDead marks a member dead.
func (s *Store) MemberDead(ctx context.Context, id string) error {
	_, err := s.propose(ctx, OpMemberDead, memberIDCmd{ID: id})
	return err
}

// SetMemberDraining sets or clears a member's decommission flag.
func (s *Store) SetMemberDraining(ctx context.Context, id string, on bool) error {
	_, err := s.propose(ctx, OpSetMemberDraining, drainCmd{ID: id, On: on})
	return err
}

// RemoveMember deletes a member record; ErrConflict while it owns or is targeted by any
// partition.
func (s *Store) RemoveMember(ctx context.Context, id string) error {
	_, err := s.propose(ctx, OpRemoveMember, memberIDCmd{ID: id})
	return err
}

// CreateUser stores a new non-root user (PasswordHash already bcrypt). ErrExists if taken.
func (s *Store) CreateUser(ctx context.Context, u User) error {
	_, err := s.propose(ctx, OpCreateUser, userCmd{User: u})
	return err
}

// UpdateUser replaces a user's password hash, grants and updated_at_ms (root flag and
// created_at_ms are kept). ErrNotFound if absent.
func (s *Store) UpdateUser(ctx context.Context, u User) error {
	_, err := s.propose(ctx, OpUpdateUser, userCmd{User: u})
	return err
}

// DeleteUser removes a user; the root user is ErrConflict.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	_, err := s.propose(ctx, OpDeleteUser, userNameCmd{Username: name})
	return err
}

// SeedRootUser stores u as the root user unless a root user was ever seeded; seeded reports
// whether this call did it.
func (s *Store) SeedRootUser(ctx context.Context, u User) (seeded bool, err error) {
	res, err := s.propose(ctx, OpSeedRootUser, userCmd{User: u})
	return res.Seeded, err
}

// AttachChild links child under parent with a fresh epoch, delay and the parent HWMs read
// for the attach point. Missing topics → ErrNotFound; bad delay/epoch → ErrInvalid; role,
// 108-children, schema and retention conflicts → ErrConflict. The same epoch again succeeds.
func (s *Store) AttachChild(ctx context.Context, parent, child, epoch string, delayMs int64, offsets []int64) error {
	_, err := s.propose(ctx, OpAttachChild, attachCmd{Child: child,
		AttachSpec: AttachSpec{Parent: parent, Epoch: epoch, DelayMs: delayMs, Offsets: offsets}})
	return err
}

// DetachChild unlinks child from parent; ErrNotFound when either is missing or child is not
// attached to parent.
func (s *Store) DetachChild(ctx context.Context, parent, child string) error {
	_, err := s.propose(ctx, OpDetachChild, detachCmd{Parent: parent, Child: child})
	return err
}

// SetAssignmentTarget aims topic/p at target if the owner is expectedOwner (op 15). Returns
// CASDone, CASAlreadyDone (same target already set), or CASRefused (ErrConflict) /
// CASNotFound (ErrNotFound), with the assignment after the command.
func (s *Store) SetAssignmentTarget(ctx context.Context, topic string, p int, target, expectedOwner string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpSetAssignmentTarget, setTargetCmd{Topic: topic, Partition: p, Target: target, ExpectedOwner: expectedOwner})
}

// CompleteMove is the ownership flip CAS (op 16): CASDone, CASAlreadyDone (already flipped
// to target), CASRefused (ErrConflict, with the current record) or CASNotFound (ErrNotFound).
func (s *Store) CompleteMove(ctx context.Context, topic string, p int, expectedOwner, target string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpCompleteMove, completeMoveCmd{Topic: topic, Partition: p, ExpectedOwner: expectedOwner, Target: target})
}

// AbortMove clears topic/p's target if it is expectedTarget (op 17): CASDone, or CASNoop when
// the target was something else (nothing changed); CASNotFound (ErrNotFound).
func (s *Store) AbortMove(ctx context.Context, topic string, p int, expectedTarget string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpAbortMove, abortMoveCmd{Topic: topic, Partition: p, ExpectedTarget: expectedTarget})
}

func (s *Store) cas(ctx context.Context, op uint8, payload any) (CASResult, Assignment, error) {
	res, err := s.propose(ctx, op, payload)
	if res.Outcome == 0 { // no verdict: raft error, timeout, closed
		return 0, Assignment{}, err
	}
	return casOf(res.Outcome), res.Assignment, err
}
