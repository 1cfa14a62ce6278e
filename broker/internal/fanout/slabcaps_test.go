package fanout

import (
	"bytes"
	"sync"
	"testing"
	"time"

	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/testwait"
)

// A slab never carries more than the configured fanout.max_batch_records, nor more key +
// payload bytes than fanout.max_batch_bytes (a single larger record still goes alone), and
// every record still arrives.
func TestSlabHonoursTheConfiguredBatchCaps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		records    int
		bytes      int
		payloadLen int
	}{
		{"records", 3, 0, 10},
		{"bytes", 0, 2500, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, cfg, dir := setup(t, 1)
			if tc.records > 0 {
				cfg.MaxBatchRecords = tc.records
			}
			if tc.bytes > 0 {
				cfg.MaxBatchBytes = tc.bytes
			}
			var mu sync.Mutex
			var over []int
			h.set(func(h *fakeHost) {
				h.onCommit = func(_ int, es []plog.Entry) {
					n := 0
					for _, e := range es {
						n += len(e.Key) + len(e.Payload)
					}
					if len(es) > cfg.MaxBatchRecords || (len(es) > 1 && n > cfg.MaxBatchBytes) {
						mu.Lock()
						over = append(over, len(es))
						mu.Unlock()
					}
				}
			})
			var es []plog.Entry
			for i := 0; i < 40; i++ {
				es = append(es, plog.Entry{Key: keyed(i), Payload: bytes.Repeat([]byte{'x'}, tc.payloadLen)})
			}
			if _, err := h.logs[0].Commit(es, 1000); err != nil {
				t.Fatal(err)
			}
			startCursor(t, cfg, desired(dir, []int64{0}))
			testwait.For(t, 10*time.Second, "all forty fanned out", fileAt(t, dir, 40))
			mu.Lock()
			defer mu.Unlock()
			if len(over) > 0 {
				t.Fatalf("commits over the configured caps (records %d, bytes %d): sizes %v", cfg.MaxBatchRecords, cfg.MaxBatchBytes, over)
			}
			if got := len(h.all()); got != 40 {
				t.Fatalf("child received %d records, want 40", got)
			}
		})
	}
}
