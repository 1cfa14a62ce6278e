package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBenchPrintsProgressLinesWhenStderrIsNotATerminal(t *testing.T) {
	b := newFakeBroker(t)
	stderr := &syncBuffer{}
	gate := make(chan struct{})
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics/{t}/produce", func(w http.ResponseWriter, r *http.Request) {
		// Hold the first produce until a progress line was printed: the run cannot end first.
		once.Do(func() {
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(stderr.String(), "bench: ") && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			close(gate)
		})
		<-gate
		b.produce(w, r)
	})
	srv := newServer(t, mux)
	a := testApp(map[string]string{EnvAddr: srv, EnvConfigDir: t.TempDir()})
	a.progressTick = 5 * time.Millisecond
	root := newRoot(a)
	var out bytes.Buffer
	root.SetArgs([]string{"bench", "bench", "--count", "20", "--workers", "2", "--json"})
	root.SetOut(&out)
	root.SetErr(stderr)
	if code := run(context.Background(), root); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "produced ") || !strings.HasPrefix(strings.TrimSpace(out.String()), "{") {
		t.Fatalf("stderr %q stdout %q", stderr.String(), out.String())
	}
}

func TestBenchDrawsAProgressBarOnATerminal(t *testing.T) {
	b := newFakeBroker(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	got := make(chan string, 1)
	go func() { s, _ := io.ReadAll(pr); got <- string(s) }()
	a := testApp(map[string]string{EnvAddr: b.srv.URL, EnvConfigDir: t.TempDir()})
	a.isTerminal = func(fd uintptr) bool { return fd == pw.Fd() }
	root := newRoot(a)
	var out bytes.Buffer
	root.SetArgs([]string{"bench", "bench", "--count", "30", "--workers", "2", "--consume"})
	root.SetOut(&out)
	root.SetErr(pw)
	code := run(context.Background(), root)
	pw.Close()
	bar := <-got
	if code != 0 {
		t.Fatalf("exit %d: %s", code, bar)
	}
	if !strings.Contains(bar, "produced 30/30") || !strings.Contains(bar, "acked 30") || !strings.Contains(out.String(), "full flow  30 acked") {
		t.Fatalf("bar %q\nstdout %q", bar, out.String())
	}
}
