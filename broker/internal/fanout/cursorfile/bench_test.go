package cursorfile

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkAdvance measures one in-place advance: a RecordSize pwrite and an fdatasync.
func BenchmarkAdvance(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "p00000")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	w, err := Anchor(dir, "analytics", testEpoch, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.SetBytes(RecordSize)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := w.Advance(int64(i) + 1); err != nil {
			b.Fatal(err)
		}
	}
}
