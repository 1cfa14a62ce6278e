package meta

import "fmt"

// Outcome is the deterministic verdict of one applied command: every replica computes the
// same one from the same state and entry.
type Outcome uint8

// Outcomes. The proposer maps them to sentinel errors (errorOf).
const (
	OutcomeOK            Outcome = iota + 1 // applied (possibly with nothing to change)
	OutcomeSkipped                          // entry index ≤ m/applied: an idempotent replay
	OutcomeInvalid                          // malformed command → ErrInvalid
	OutcomeNotFound                         // a record the command needs is missing → ErrNotFound
	OutcomeExists                           // a create found the record → ErrExists
	OutcomeRefused                          // an invariant or CAS refused it → ErrConflict
	OutcomeAlreadyDone                      // a CAS whose effect already held: a done flip, a retried replication op (success)
	OutcomeNoop                             // AbortMove: the CAS did not match, nothing changed (success)
	OutcomeStaleEpoch                       // a replication op named an old leader epoch → ErrStaleEpoch
	OutcomeBadReplicaSet                    // a replication op broke the replica-set invariants → ErrBadReplicaSet
)

var outcomeNames = [...]string{"", "ok", "skipped", "invalid", "not_found", "exists", "refused", "already_done", "noop",
	"stale_epoch", "bad_replica_set"}

// String returns the outcome's stable name ("ok", "refused", …).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is what Apply returns (raft ApplyFuture.Response) for every command entry. A
// forwarded proposal ships it back from the leader as JSON (these field names are stable).
type Result struct {
	Outcome    Outcome    `json:"outcome"`
	Reason     string     `json:"reason,omitempty"`  // why, for invalid/refused/not_found (stable English text)
	Topic      Topic      `json:"topic"`             // create/update/attach/detach: the record after; delete: the deleted record
	Assignment Assignment `json:"assignment"`        // assignment ops: the record after (or the current one when refused)
	Version    uint32     `json:"version,omitempty"` // PutSchema / schema-carrying ops: latest schema version after apply
	Seeded     bool       `json:"seeded,omitempty"`  // SeedRootUser: true when this entry seeded the root user
}

// Err maps a Result to the sentinel errors of types.go (nil for success outcomes): what a
// proposal returns for it. A follower maps a Result shipped back by the leader with it.
func (r Result) Err() error { return r.errorOf() }

// errorOf maps a Result to the sentinel errors of types.go (nil for success outcomes).
func (r Result) errorOf() error {
	switch r.Outcome {
	case OutcomeOK, OutcomeAlreadyDone, OutcomeNoop:
		return nil
	case OutcomeInvalid:
		return fmt.Errorf("%w: %s", ErrInvalid, r.Reason)
	case OutcomeNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, r.Reason)
	case OutcomeExists:
		return fmt.Errorf("%w: %s", ErrExists, r.Reason)
	case OutcomeRefused:
		return fmt.Errorf("%w: %s", ErrConflict, r.Reason)
	case OutcomeStaleEpoch:
		return fmt.Errorf("%w: %s", ErrStaleEpoch, r.Reason)
	case OutcomeBadReplicaSet:
		return fmt.Errorf("%w: %s", ErrBadReplicaSet, r.Reason)
	case OutcomeSkipped:
		// A live proposal is never at or below m/applied; reaching this is a bug upstream.
		return fmt.Errorf("%w: entry was replayed, not applied", ErrConflict)
	}
	return fmt.Errorf("%w: unknown outcome %d", ErrConflict, r.Outcome)
}

func okResult() Result { return Result{Outcome: OutcomeOK} }

func invalid(format string, args ...any) Result {
	return Result{Outcome: OutcomeInvalid, Reason: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) Result {
	return Result{Outcome: OutcomeNotFound, Reason: fmt.Sprintf(format, args...)}
}

func exists(format string, args ...any) Result {
	return Result{Outcome: OutcomeExists, Reason: fmt.Sprintf(format, args...)}
}

func refused(format string, args ...any) Result {
	return Result{Outcome: OutcomeRefused, Reason: fmt.Sprintf(format, args...)}
}

// CASResult is the verdict of the assignment compare-and-swap commands (ops 15–17, 23–25).
type CASResult uint8

// CAS results (docs/internals/metastore.md §7).
const (
	CASDone        CASResult = iota + 1 // the swap happened
	CASAlreadyDone                      // the desired state already held (op 15: same target; op 16: already flipped)
	CASRefused                          // the expectation did not hold (→ ErrConflict)
	CASNotFound                         // no such assignment (→ ErrNotFound)
	CASNoop                             // op 17: target was not the expected one; nothing changed
)

var casNames = [...]string{"", "done", "already_done", "refused", "not_found", "noop"}

// String returns the CAS result's stable name ("done", "already_done", …).
func (c CASResult) String() string {
	if int(c) < len(casNames) && c != 0 {
		return casNames[c]
	}
	return fmt.Sprintf("cas(%d)", uint8(c))
}

func casOf(o Outcome) CASResult {
	switch o {
	case OutcomeOK:
		return CASDone
	case OutcomeAlreadyDone:
		return CASAlreadyDone
	case OutcomeNotFound:
		return CASNotFound
	case OutcomeNoop:
		return CASNoop
	case OutcomeRefused, OutcomeExists, OutcomeStaleEpoch, OutcomeBadReplicaSet:
		return CASRefused
	}
	return 0 // not a CAS verdict (invalid command)
}
