package log

import (
	"testing"
)

// The delay gate: a read stops at the first record committed after maxCommittedAt, reports
// when it becomes due, and never returns a record that is not due.
func TestReadDueStopsAtTheFirstRecordNotDueAndReportsItsTime(t *testing.T) {
	l := openT(t, t.TempDir(), Options{})
	defer closeT(t, l)
	commitT(t, l, testEntries("a", 3, 10), 1000) // offsets 0-2 at t=1000
	commitT(t, l, testEntries("b", 2, 10), 2000) // offsets 3-4 at t=2000
	commitT(t, l, testEntries("c", 1, 10), 3000) // offset 5 at t=3000

	cases := []struct {
		name           string
		from           int64
		max            int
		gate           int64
		want, notDueAt int64
	}{
		{"nothing due yet", 0, 0, 999, 0, 1000},
		{"first commit due only", 0, 0, 1999, 3, 2000},
		{"gate exactly at a commit time admits it", 0, 0, 2000, 5, 3000},
		{"everything due", 0, 0, NoDueLimit, 6, 0},
		{"from the middle", 3, 0, 2500, 2, 3000},
		{"record cap before the gate", 0, 2, 2500, 2, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, notDue, err := l.ReadDue(tc.from, tc.max, 0, tc.gate)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(recs)) != tc.want || notDue != tc.notDueAt {
				t.Fatalf("ReadDue(%d, gate %d) = %d records, not due at %d; want %d, %d", tc.from, tc.gate, len(recs), notDue, tc.want, tc.notDueAt)
			}
			for _, r := range recs {
				if r.CommittedAt > tc.gate {
					t.Fatalf("record %d committed at %d returned through a gate at %d", r.Offset, r.CommittedAt, tc.gate)
				}
			}
		})
	}
	if _, _, err := l.ReadDue(6, 0, 0, NoDueLimit); err != ErrNotVisible {
		t.Fatalf("ReadDue at the HWM: %v, want ErrNotVisible", err)
	}
}
