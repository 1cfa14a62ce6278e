package wal

import (
	"context"
	"fmt"
	"os"
	"testing"
)

const crashEnv = "NARAD_WAL_CRASH_DIR"

// TestMain turns the test binary into the crash tests' child process when crashEnv is set: it
// appends one record, prints its seq, and waits to be killed with SIGKILL (or dies earlier at a
// NARAD_FAULTS crash point before Append returns).
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
	}
	os.Exit(m.Run())
}

func crashChild(dir string) {
	w, err := Open(dir, Options{})
	if err != nil {
		fmt.Println("open error:", err)
		os.Exit(3)
	}
	seq, err := w.Append(context.Background(), testRecord(77))
	if err != nil {
		fmt.Println("append error:", err)
		os.Exit(3)
	}
	fmt.Printf("appended %d\n", seq)
	select {} // the parent kill -9s us
}
