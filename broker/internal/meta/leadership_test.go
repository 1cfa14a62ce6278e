package meta

import (
	"errors"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

func TestTransferLeadershipHandsOverToTheNamedVoter(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"}, "d")
	a, ctx := c.stores["a"], ctxT(t)
	if err := a.AddNonvoter(ctx, "d", "d"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		id   string
		want error
	}{
		{"itself", "a", ErrInvalid},
		{"empty", "", ErrInvalid},
		{"unknown", "zz", ErrNotFound},
		{"non-voter", "d", ErrInvalid},
	} {
		if err := a.TransferLeadership(ctx, tc.id, ""); !errors.Is(err, tc.want) {
			t.Fatalf("transfer to %s (%s) = %v, want %v", tc.id, tc.name, err, tc.want)
		}
	}
	if err := c.stores["c"].TransferLeadership(ctx, "b", ""); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("transfer from a follower = %v, want ErrNotLeader", err)
	}
	if !a.IsLeader() {
		t.Fatal("a refused transfer cost a its leadership")
	}
	if err := a.TransferLeadership(ctx, "b", ""); err != nil {
		t.Fatalf("transfer to b = %v", err)
	}
	testwait.For(t, 10*time.Second, "b leads", func() bool { return c.stores["b"].IsLeader() })
	if a.IsLeader() {
		t.Fatal("a still leads after handing over")
	}
}
