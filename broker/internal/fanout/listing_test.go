package fanout

import (
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// Every failure state a sender reports outranks active, so the listing shows it.
func TestRemoteListingShowsEverySenderFailureState(t *testing.T) {
	for _, st := range []string{RemoteRejected, RemoteNotAllowedHost, RemoteRedirectRefused,
		RemoteUnauthorized, RemoteTopicMissing, RemoteUnreachable, RemoteBehindRetention} {
		if remoteRank(st) <= remoteRank(RemoteActive) {
			t.Errorf("state %s ranks %d, not above active", st, remoteRank(st))
		}
	}
}

func report(hwm int64, cursors ...CursorReport) *PartitionCursors {
	return &PartitionCursors{HighWatermark: hwm, HWMKnown: true, Cursors: cursors}
}

// A local child's entry sums the lag over the partitions that reported a cursor of its epoch;
// a partition that did not report, reported no exact HWM, or holds only another epoch's cursor
// makes it incomplete; a stalled cursor makes a complete listing stalled.
func TestLocalListingStateFollowsTheReports(t *testing.T) {
	child := meta.Topic{Name: "c", Parent: "p", AttachEpoch: "e1"}
	owners := []string{"n1", "n2", "n3"}
	cur := func(next int64, stalled bool) CursorReport {
		return CursorReport{Child: "c", Epoch: "e1", NextOffset: next, Stalled: stalled}
	}
	for _, tc := range []struct {
		name    string
		reports []*PartitionCursors
		state   string
		lag     int64
	}{
		{"every partition reports", []*PartitionCursors{report(10, cur(4, false)), report(5, cur(5, false)), report(0, cur(0, false))}, service.ChildActive, 6},
		{"a stalled cursor", []*PartitionCursors{report(10, cur(4, false)), report(5, cur(2, true)), report(0, cur(0, false))}, service.ChildStalled, 9},
		{"a partition did not report", []*PartitionCursors{report(10, cur(4, false)), nil, report(0, cur(0, false))}, service.ChildIncomplete, 6},
		{"an inexact HWM", []*PartitionCursors{report(10, cur(4, false)), {Cursors: []CursorReport{cur(1, false)}}, report(0, cur(0, false))}, service.ChildIncomplete, 6},
		{"another epoch's cursor", []*PartitionCursors{report(10, cur(4, false)), report(5, CursorReport{Child: "c", Epoch: "e0"}), report(0, cur(0, false))}, service.ChildIncomplete, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := localListing(child, tc.reports, owners)
			if cs.State != tc.state || cs.LagMessages != tc.lag || cs.LagComplete != (tc.state != service.ChildIncomplete) {
				t.Fatalf("state %s lag %d complete %v; want %s, %d", cs.State, cs.LagMessages, cs.LagComplete, tc.state, tc.lag)
			}
			if cs.DueLagSeconds != nil {
				t.Fatal("an immediate child reports a due lag")
			}
		})
	}
}

// A remote link's entry shows the most severe state any cursor reports, with that cursor's
// last error, and each reporting partition's position as its recovery point.
func TestRemoteLinkListingShowsTheWorstStateAndTheRecoveryPoint(t *testing.T) {
	link := meta.RemoteLink{Parent: "p", ID: "remote:t@h:1", URLs: []string{"http://h:1"}, Topic: "t", AttachEpoch: "e1"}
	cur := func(next int64, state, lastErr string) CursorReport {
		return CursorReport{Child: link.ID, Epoch: "e1", NextOffset: next, RemoteState: state, LastError: lastErr}
	}
	reports := []*PartitionCursors{
		report(10, cur(3, RemoteUnreachable, "dial refused")),
		report(10, cur(7, RemoteUnauthorized, "401")),
		report(10, cur(10, RemoteActive, "")),
	}
	cs := remoteLinkListing(link, reports, []string{"n1", "n1", "n2"})
	if cs.State != RemoteUnauthorized || cs.LastError != "401" {
		t.Fatalf("state %s (%q), want %s with its error", cs.State, cs.LastError, RemoteUnauthorized)
	}
	if cs.RecoveryPoint["0"] != 3 || cs.RecoveryPoint["1"] != 7 || cs.RecoveryPoint["2"] != 10 || cs.LagMessages != 10 {
		t.Fatalf("recovery point %v, lag %d", cs.RecoveryPoint, cs.LagMessages)
	}
	if cs := remoteLinkListing(link, []*PartitionCursors{report(10, cur(3, RemoteActive, "")), nil}, []string{"n1", "n2"}); cs.State != service.ChildIncomplete || cs.LagComplete {
		t.Fatalf("a partition without a report: state %s, complete %v", cs.State, cs.LagComplete)
	}
}
