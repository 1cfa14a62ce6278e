package errcode

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestNotEnoughMembersIsUnprocessable(t *testing.T) {
	if got := HTTPStatus(fmt.Errorf("place: %w", ErrNotEnoughMembers)); got != http.StatusUnprocessableEntity {
		t.Fatalf("HTTPStatus = %d, want 422", got)
	}
}

// The replication refusals are conflicts: 409 to a client, ErrConflict to a caller that
// knows no better, and their own sentinel across a leader-plane reply.
func TestReplicationRefusalsAreConflicts(t *testing.T) {
	for _, s := range []error{ErrStaleEpoch, ErrBadReplicaSet} {
		if !errors.Is(s, ErrConflict) {
			t.Errorf("%v is not a kind of ErrConflict", s)
		}
		if got := HTTPStatus(fmt.Errorf("orders/0: %w", s)); got != http.StatusConflict {
			t.Errorf("HTTPStatus(%v) = %d, want 409", s, got)
		}
		st, reason, msg := Leader.Reply(fmt.Errorf("orders/0: %w", s))
		if st != 409 || reason != ReasonOf(s) || reason == "conflict" {
			t.Errorf("Leader.Reply(%v) = %d %q", s, st, reason)
		}
		got := Leader.Error(st, string(reason), msg)
		if !errors.Is(got, s) || !errors.Is(got, ErrConflict) {
			t.Errorf("Leader.Error read %v back as %v", s, got)
		}
		// A plane that does not speak them sends a plain conflict.
		st, reason, msg = Data.Reply(s)
		if got := Data.Error(st, string(reason), msg); st != 409 || !errors.Is(got, ErrConflict) || errors.Is(got, s) {
			t.Errorf("Data plane: %v → %d %q → %v", s, st, reason, got)
		}
	}
}
