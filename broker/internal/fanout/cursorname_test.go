package fanout

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

// Child names that broke the cursor file in the layout before version 2: one holding the
// temp-file pattern (the parent log's open deleted its file, so every restart replayed from
// the attach point) and the longest legal topic name (its file name was too long to create,
// so nothing was delivered). Each gets every record exactly once across a restart of the
// parent log and of its cursor.
func TestEveryLegalChildNameGetsEachRecordOnceAcrossAParentLogRestart(t *testing.T) {
	for _, child := range []string{"audit.tmp-7", strings.Repeat("c", 255)} {
		t.Run(child[:8], func(t *testing.T) {
			h, obs := newFakeHost(), newFakeObserver()
			root := t.TempDir()
			dir := openParent(t, h, root, 0, plog.Options{})
			h.set(func(h *fakeHost) {
				h.childParts[child] = 1
				h.links["orders/"+child] = epoch
				h.leader["orders/"+child] = epoch
			})
			cfg := testConfig(h, obs)
			d := Desired{Parent: "orders", Child: child, Epoch: epoch, AttachOffsets: []int64{0}, Dir: dir}
			at := func(want int64) func() bool {
				return func() bool {
					st, err := cursorfile.Read(context.Background(), cursorfile.Path(dir, child))
					return err == nil && st.NextOffset == want
				}
			}
			produce(t, h.logs[0], 0, 10, keyed, 1000)
			stop, _ := startCursor(t, cfg, d)
			testwait.For(t, 10*time.Second, "first ten fanned out", at(10))
			stop()

			// Restart the parent log: its open removes temp files from the directory.
			if err := h.logs[0].Close(); err != nil {
				t.Fatal(err)
			}
			openParent(t, h, root, 0, plog.Options{})
			produce(t, h.logs[0], 10, 20, keyed, 1000)
			startCursor(t, cfg, d)
			testwait.For(t, 10*time.Second, "the rest fanned out", at(20))

			count := map[string]int{}
			for _, p := range h.all() {
				count[p]++
			}
			for i := 0; i < 20; i++ {
				if c := count["m"+strconv.Itoa(i)]; c != 1 {
					t.Fatalf("record m%d delivered %d times, want exactly once (got %d records)", i, c, len(h.all()))
				}
			}
		})
	}
}
