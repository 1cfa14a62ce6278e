package cursorfile

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

const (
	testEpoch = "67953471cc57a32a"
	testChild = "analytics"
)

// tempCursor returns the cursor path of child "analytics" in a fresh partition directory.
func tempCursor(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "p00003")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return Path(dir, "analytics")
}

// mustEncode encodes a version 2 record of testChild.
func mustEncode(t testing.TB, epoch string, next int64) []byte {
	t.Helper()
	b, err := Encode(testChild, epoch, next)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustEncodeV1(t testing.TB, epoch string, next int64) []byte {
	t.Helper()
	b, err := EncodeV1(epoch, next)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, path string) State {
	t.Helper()
	st, err := Read(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func writeRaw(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
