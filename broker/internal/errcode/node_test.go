package errcode

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var planes = map[string]*Plane{"Data": Data, "Consume": Consume, "AckResult": AckResult, "Leader": Leader,
	"LeaderCreate": LeaderCreate, "LeaderRead": LeaderRead, "Source": Source, "Decommission": Decommission,
	"Replica": Replica}

// readAs is what the caller of p reads sentinel s as.
func readAs(p *Plane, s error) error {
	if as, ok := p.as[s]; ok {
		return as
	}
	return s
}

func TestEverySentinelOfAPlaneRoundTrips(t *testing.T) {
	for name, p := range planes {
		for _, s := range p.sends {
			err := fmt.Errorf("t/0: %w", s)
			st, reason, msg := p.Reply(err)
			if reason == "" || st < 300 {
				t.Errorf("%s: %v answered %d %q", name, s, st, reason)
			}
			got := p.Error(st, string(reason), msg)
			if !errors.Is(got, readAs(p, s)) {
				t.Errorf("%s: %v → (%d, %q) → %v, want it to wrap %v", name, s, st, reason, got, readAs(p, s))
			}
			if got.Error() != err.Error() {
				t.Errorf("%s: message %q, want %q", name, got.Error(), err.Error())
			}
		}
	}
}

func TestEveryReasonOnTheWireIsUnique(t *testing.T) {
	seen := map[Reason]error{}
	for _, r := range nodeTable {
		if r.reason == "" {
			t.Errorf("%v has no reason", r.err)
		}
		if prev, dup := seen[r.reason]; dup {
			t.Errorf("reason %q names both %v and %v", r.reason, prev, r.err)
		}
		seen[r.reason] = r.err
		if ReasonOf(r.err) != r.reason {
			t.Errorf("ReasonOf(%v) = %q", r.err, ReasonOf(r.err))
		}
	}
	for name, p := range planes {
		for _, s := range p.sends {
			if _, ok := rowOf(s); !ok {
				t.Errorf("%s sends %v, which has no table row", name, s)
			}
		}
	}
}

func TestFenceReasonsKeepTheirWireText(t *testing.T) {
	for _, s := range []error{ErrFreezeLapsed, ErrUnknownToken, ErrHWMMismatch} {
		if string(ReasonOf(s)) != s.Error() {
			t.Errorf("%v travels as %q", s, ReasonOf(s))
		}
	}
}

// An older peer sends no reason: the status alone decides, as before reasons existed.
func TestReplyWithoutReasonReadsByStatus(t *testing.T) {
	cases := []struct {
		plane *Plane
		st    int32
		want  error
	}{
		{Data, 400, ErrInvalid}, {Data, 404, ErrNotFound}, {Data, 409, ErrConflict}, {Data, 410, ErrGone},
		{Data, 421, ErrNotOwner}, {Data, 503, ErrUnavailable}, {Data, 500, ErrUnavailable},
		{Consume, 421, ErrNotOwner},
		{AckResult, 410, ErrStale}, {AckResult, 421, ErrUnavailable}, {AckResult, 404, ErrNotFound},
		{AckResult, 503, ErrUnavailable},
		{Leader, 400, ErrInvalid}, {Leader, 404, ErrNotFound}, {Leader, 409, ErrConflict},
		{Leader, 421, ErrNotLeader}, {Leader, 503, ErrNoLeader}, {Leader, 410, ErrNoLeader},
		{LeaderCreate, 409, ErrExists},
		{Source, 404, ErrNotFound}, {Source, 421, ErrNotOwner}, {Source, 409, ErrFreezeLapsed},
		{Source, 400, ErrUnavailable}, {Source, 503, ErrUnavailable},
		{Replica, 409, ErrStaleEpoch}, {Replica, 410, ErrGone}, {Replica, 400, ErrInvalid},
		{Replica, 421, ErrNotOwner}, {Replica, 503, ErrUnavailable},
	}
	for _, c := range cases {
		if got := c.plane.Error(c.st, "", "m"); !errors.Is(got, c.want) {
			t.Errorf("%s %d → %v, want %v", c.plane.who, c.st, got, c.want)
		}
	}
}

// The owner side today: which status each plane answers for the sentinels it does not speak.
func TestUnspokenErrorsAre503WithoutReason(t *testing.T) {
	cases := []struct {
		plane *Plane
		err   error
	}{
		{Data, ErrSchema}, {Data, ErrNotLeader}, {Data, ErrOwnerDown}, {Data, errors.New("eio")},
		{Leader, ErrNotOwner}, {Leader, ErrStale}, {Leader, ErrGone},
		{LeaderRead, ErrNotFound}, {LeaderRead, ErrInvalid},
		{Decommission, ErrConflict}, {Decommission, ErrInvalid},
	}
	for _, c := range cases {
		st, reason, msg := c.plane.Reply(c.err)
		if st != 503 || reason != "" || msg != c.err.Error() {
			t.Errorf("%s: %v → (%d, %q, %q), want 503 without a reason", c.plane.who, c.err, st, reason, msg)
		}
	}
	if st, r, m := Data.Reply(nil); st != 200 || r != "" || m != "" {
		t.Errorf("nil → (%d, %q, %q)", st, r, m)
	}
}

func TestReasonRefinesOnlyItsOwnStatusAndPlane(t *testing.T) {
	// The acked-ahead cap is a 503 named by its reason, never by its text.
	if err := Data.Error(503, "acked_ahead_full", "x"); !errors.Is(err, ErrAckedAheadFull) {
		t.Errorf("reason ignored: %v", err)
	}
	if err := Data.Error(503, "", "p/0: acked-ahead window full"); errors.Is(err, ErrAckedAheadFull) {
		t.Error("a message text must not classify a reply")
	}
	// A reason sent with another status, or one the plane does not speak, is ignored.
	if err := Data.Error(404, "acked_ahead_full", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("mismatched status: %v", err)
	}
	if err := Leader.Error(421, "not_owner", "x"); !errors.Is(err, ErrNotLeader) {
		t.Errorf("foreign reason: %v", err)
	}
	if err := Source.Error(409, "hwm_mismatch", ""); !errors.Is(err, ErrHWMMismatch) || err.Error() != "source answered 409" {
		t.Errorf("fence: %v", err)
	}
	if err := Data.Error(204, "not_owner", "x"); err != nil {
		t.Errorf("2xx is never an error: %v", err)
	}
}

func TestTransportStatus(t *testing.T) {
	if TransportStatus(nil) != 0 {
		t.Error("nil")
	}
	if TransportStatus(status.Error(codes.Unimplemented, "x")) != 400 {
		t.Error("Unimplemented is an older peer: 400")
	}
	for _, c := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Canceled} {
		if TransportStatus(status.Error(c, "x")) != 503 {
			t.Errorf("%v must be 503", c)
		}
	}
	if TransportStatus(errors.New("dial")) != 503 {
		t.Error("plain error must be 503")
	}
}

// FuzzPlaneError reads arbitrary replies: a 2xx is never an error, anything else is an error
// that wraps a sentinel the plane can produce and keeps the peer's message.
func FuzzPlaneError(f *testing.F) {
	f.Add(int32(503), "acked_ahead_full", "x")
	f.Add(int32(409), "hwm_mismatch", "")
	f.Add(int32(421), "", "not the owner")
	f.Add(int32(204), "not_owner", "")
	f.Fuzz(func(t *testing.T, st int32, reason, msg string) {
		for name, p := range planes {
			err := p.Error(st, reason, msg)
			if st >= 200 && st < 300 {
				if err != nil {
					t.Fatalf("%s: 2xx read as %v", name, err)
				}
				continue
			}
			if err == nil {
				t.Fatalf("%s: %d read as success", name, st)
			}
			if msg != "" && err.Error() != msg {
				t.Fatalf("%s: message %q became %q", name, msg, err.Error())
			}
			known := errors.Is(err, p.fallback)
			for _, s := range p.sends {
				known = known || errors.Is(err, readAs(p, s))
			}
			for _, s := range p.byStatus {
				known = known || errors.Is(err, s)
			}
			if !known {
				t.Fatalf("%s: (%d, %q) read as %v, no sentinel of the plane", name, st, reason, err)
			}
		}
	})
}
