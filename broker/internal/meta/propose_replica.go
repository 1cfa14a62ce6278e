package meta

import "context"

// Proposals of the replication ops (docs/internals/replication.md §2). Each returns the CAS
// verdict with the assignment after the command (the current record when refused): CASDone,
// CASAlreadyDone (a retry whose effect already holds), CASRefused (the error wraps
// ErrStaleEpoch, ErrBadReplicaSet or ErrConflict, all kinds of ErrConflict) or CASNotFound
// (ErrNotFound). A malformed command is ErrInvalid with no verdict; Raft failures are as for
// every proposal (propose.go).

// SetISR replaces topic/p's ISR expectedISR with newISR on behalf of the leader of
// leaderEpoch (op 23). newISR must hold the leader and only replicas.
func (s *Store) SetISR(ctx context.Context, topic string, p int, leaderEpoch uint64, expectedISR, newISR []string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpSetISR, setISRCmd{Topic: topic, Partition: p, LeaderEpoch: leaderEpoch,
		ExpectedISR: expectedISR, NewISR: newISR})
}

// ElectLeader makes newLeader the leader of topic/p at epoch expectedEpoch + 1 (op 24).
// reason is ElectDead, ElectShutdown, ElectPreferred, ElectUnclean or ElectReassign; only the last may pick
// a replica outside the ISR, and only on a topic that allows unclean election.
func (s *Store) ElectLeader(ctx context.Context, topic string, p int, expectedEpoch uint64, newLeader, reason string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpElectLeader, electLeaderCmd{Topic: topic, Partition: p, ExpectedEpoch: expectedEpoch,
		NewLeader: newLeader, Reason: reason})
}

// SetReplicas replaces topic/p's replica list and ISR under expectedEpoch (op 25, one step of
// a reassignment). The leader stays in both; the ISR may only lose members.
func (s *Store) SetReplicas(ctx context.Context, topic string, p int, expectedEpoch uint64, replicas, isr []string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpSetReplicas, setReplicasCmd{Topic: topic, Partition: p, ExpectedEpoch: expectedEpoch,
		Replicas: replicas, ISR: isr})
}

// ReassignReplicas is SetReplicas that also records a replica move (op 25 with
// target_replicas, docs/internals/replication.md §9): target is the ordered replica list the
// partition ends with.
func (s *Store) ReassignReplicas(ctx context.Context, topic string, p int, expectedEpoch uint64, replicas, isr, target []string) (CASResult, Assignment, error) {
	return s.cas(ctx, OpSetReplicas, setReplicasCmd{Topic: topic, Partition: p, ExpectedEpoch: expectedEpoch,
		Replicas: replicas, ISR: isr, TargetReplicas: target})
}
