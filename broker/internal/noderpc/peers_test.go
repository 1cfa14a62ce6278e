package noderpc

import (
	"errors"
	"testing"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
)

// docs/internals/metastore.md §9 caller rules: only a reply marked leader_read confirms; 404 is
// authoritatively absent; 421, 503, an unmarked or undecodable reply are unconfirmed.
func TestLeaderReadRepliesConfirmOnlyWhenMarked(t *testing.T) {
	cases := []struct {
		name      string
		status    int32
		marked    bool
		body      string
		wantFound bool
		wantErr   bool
		notLeader bool
	}{
		{"found", 200, true, `{"name":"t","partitions":3}`, true, false, false},
		{"absent", 404, true, ``, false, false, false},
		{"unmarked 200", 200, false, `{"name":"t"}`, false, true, false},
		{"unmarked 404", 404, false, ``, false, true, false},
		{"not the leader", 421, true, ``, false, true, true},
		{"no quorum", 503, true, ``, false, true, false},
		{"undecodable", 200, true, `{`, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := decodeLeaderRead[meta.Topic]("n1", tc.status, "", "", tc.marked, []byte(tc.body))
			if found != tc.wantFound || (err != nil) != tc.wantErr {
				t.Fatalf("found=%v err=%v; want found=%v err=%v", found, err, tc.wantFound, tc.wantErr)
			}
			if tc.wantFound && got.Name != "t" {
				t.Fatalf("decoded %+v", got)
			}
			if tc.notLeader && !errors.Is(err, meta.ErrNotLeader) {
				t.Fatalf("421 gave %v, want ErrNotLeader", err)
			}
		})
	}
}

func TestReplyStatusesMapToTheSentinelsOfTheirPlane(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"data 200", dataError(200, "", ""), nil},
		{"data 204", dataError(204, "", ""), nil},
		{"data 410", dataError(410, "", "gone"), errcode.ErrGone},
		{"data 421", dataError(421, "", ""), errcode.ErrNotOwner},
		{"data 503", dataError(503, "", "x"), errcode.ErrUnavailable},
		{"data 503 acked-ahead", dataError(503, "acked_ahead_full", "p/0: "+errcode.ErrAckedAheadFull.Error()), errcode.ErrAckedAheadFull},
		{"leader 421", leaderError(421, "", "", false), meta.ErrNotLeader},
		{"leader 409 create", leaderError(409, "", "", true), errcode.ErrExists},
		{"leader 409 alter", leaderError(409, "", "", false), errcode.ErrConflict},
		{"leader 500", leaderError(500, "", "", false), meta.ErrNoLeader},
	}
	for _, tc := range cases {
		if tc.want == nil {
			if tc.err != nil {
				t.Fatalf("%s: %v, want nil", tc.name, tc.err)
			}
			continue
		}
		if !errors.Is(tc.err, tc.want) {
			t.Fatalf("%s: %v does not wrap %v", tc.name, tc.err, tc.want)
		}
	}
	// The acked-ahead cap is recognised by its reason, never by the message text.
	if err := dataError(503, "", errcode.ErrAckedAheadFull.Error()); errors.Is(err, errcode.ErrAckedAheadFull) {
		t.Fatalf("message text classified a reply: %v", err)
	}
	if got := dataError(503, "", "").Error(); got != "peer answered 503" {
		t.Fatalf("empty message: %q", got)
	}
}
