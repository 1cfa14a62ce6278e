package server

import (
	"errors"
	"testing"

	"narad.dev/broker/internal/meta"
)

// spec/cluster.md §5.3 caller rules: only a reply marked leader_read confirms; 404 is
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
			got, found, err := decodeLeaderRead[meta.Topic]("n1", tc.status, "", tc.marked, []byte(tc.body))
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
