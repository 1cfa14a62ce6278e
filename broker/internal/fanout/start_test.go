package fanout

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
	"narad.dev/broker/internal/transfer"
)

// docs/internals/fanout.md §5 rows 4–5: a legacy link (no attach offsets) with no cursor file starts at the
// oldest retained offset when the partition's move.marker lists (child, epoch), and at the
// live tail otherwise.
func TestLegacyLinkStartRowsFourAndFive(t *testing.T) {
	cases := []struct {
		name   string
		marker func(t *testing.T, dir string)
		oldest bool // want the first delivery at the oldest retained offset (else the tail)
	}{
		{"MarkerListingTheLinkStartsAtOldestRetained", func(t *testing.T, dir string) {
			writeMarker(t, dir, []transfer.Link{{Child: "other", Epoch: epoch}, {Child: "an", Epoch: epoch}})
		}, true},
		{"MarkerListingAnotherEpochStartsAtTail", func(t *testing.T, dir string) {
			writeMarker(t, dir, []transfer.Link{{Child: "an", Epoch: "0000000000000000"}})
		}, false},
		{"MarkerWithoutTheLinkStartsAtTail", func(t *testing.T, dir string) { writeMarker(t, dir, nil) }, false},
		{"NoMarkerStartsAtTail", func(*testing.T, string) {}, false},
		{"UnreadableMarkerErrsTowardsOldest", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, transfer.MarkerFile), []byte(`{"crc":"00000000","v":1}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, obs := newFakeHost(), newFakeObserver()
			dir := openParent(t, h, t.TempDir(), 0, plog.Options{SegmentBytes: 128})
			h.set(func(h *fakeHost) {
				h.childParts["an"] = 1
				h.links["orders/an"] = epoch
				h.leader["orders/an"] = epoch
			})
			lg := h.logs[0]
			for i := 0; i < 10; i++ { // one commit per record: the log rolls every few records
				produce(t, lg, i, i+1, keyed, 1000)
			}
			// Age out the oldest sealed segment, so "oldest retained" is not offset 0.
			first := filepath.Join(dir, plog.SegmentFileName(0))
			old := time.Now().Add(-48 * time.Hour)
			if err := os.Chtimes(first, old, old); err != nil {
				t.Fatal(err)
			}
			if _, err := lg.ApplyRetention(int64(time.Hour/time.Millisecond), time.Now()); err != nil {
				t.Fatal(err)
			}
			oldest := lg.OldestOffset()
			if oldest == 0 || oldest >= 10 {
				t.Fatalf("oldest retained offset %d; the test needs one in (0, 10)", oldest)
			}
			tc.marker(t, dir)

			startCursor(t, testConfig(h, obs), desired(dir, nil))
			if tc.oldest {
				testwait.For(t, 10*time.Second, "first delivery", func() bool { return len(h.all()) > 0 })
				if got, want := h.payloads(0)[0], "m"+strconv.FormatInt(oldest, 10); got != want {
					t.Fatalf("first record = %s, want %s (the oldest retained offset)", got, want)
				}
				testwait.For(t, 10*time.Second, "caught up", fileAt(t, dir, 10))
				return
			}
			testwait.For(t, 10*time.Second, "tail anchor", fileAt(t, dir, 10))
			produce(t, lg, 10, 11, keyed, 1000)
			testwait.For(t, 10*time.Second, "caught up", fileAt(t, dir, 11))
			if got := h.all(); len(got) != 1 || got[0] != "m10" {
				t.Fatalf("child received %v, want only m10 (anchored at the tail)", got)
			}
		})
	}
}

func writeMarker(t *testing.T, dir string, links []transfer.Link) {
	t.Helper()
	m := transfer.Marker{Topic: "orders", Partition: 0, Incarnation: "0123456789abcdef", From: "n1", To: "n2",
		HWM: 10, InstalledAtMs: 1, Links: links}
	if err := transfer.WriteMarker(dir, m); err != nil {
		t.Fatal(err)
	}
}
