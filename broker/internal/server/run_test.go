package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/config"
)

// logBuffer collects the node's JSON log lines (Run writes from many goroutines).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// field returns the value of key in the first JSON log line whose msg is msg.
func (b *logBuffer) field(msg, key string) (string, bool) {
	b.mu.Lock()
	data := append([]byte(nil), b.buf.Bytes()...)
	b.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != msg {
			continue
		}
		v, ok := line[key].(string)
		return v, ok
	}
	return "", false
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// devConfig resolves a dev node's configuration the way `narad serve` does, on loopback
// with kernel-chosen ports.
func devConfig(t *testing.T, dir string) config.Serve {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.Register(fs)
	if err := fs.Parse([]string{"--dev", "--data-dir", dir, "--node-id", "n1",
		"--http-addr", "127.0.0.1:0", "--cluster-addr", "127.0.0.1:0", "--log-format", "json",
		"--max-consume-wait", "2s", "--shutdown-grace", "5s"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runningNode is one server.Run in a goroutine.
type runningNode struct {
	cancel context.CancelFunc
	done   chan error
	logs   *logBuffer
	c      *client.Client
}

func startRun(t *testing.T, cfg config.Serve) *runningNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n := &runningNode{cancel: cancel, done: make(chan error, 1), logs: &logBuffer{}}
	go func() { n.done <- Run(ctx, cfg, n.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-n.done:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if a, ok := n.logs.field("narad ready", "http"); ok {
			addr = a
			break
		}
		select {
		case err := <-n.done:
			t.Fatalf("Run returned before ready: %v\nlogs:\n%s", err, n.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not ready after 30 s; logs:\n%s", n.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := clientFor(cfg, addr)
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := c.Readyz(ctx)
		cancel()
		if err == nil && st != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// clientFor returns an API client for a node of cfg listening on addr: https trusting the
// cluster CA when the node serves TLS.
func clientFor(cfg config.Serve, addr string) (*client.Client, error) {
	if cfg.TLSCertFile == "" {
		return client.New("http://" + addr)
	}
	pem, err := os.ReadFile(cfg.ClusterTLSCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return client.New("https://"+addr, client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
}

// stop cancels Run and returns its result.
func (n *runningNode) stop(t *testing.T) error {
	t.Helper()
	n.cancel()
	select {
	case err := <-n.done:
		n.done <- err // for the cleanup
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of cancel")
		return nil
	}
}

// drain consumes from topic until a consume comes back empty; it returns payload → handle.
func drain(t *testing.T, c *client.Client, topic string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		msgs, err := c.Consume(ctx, topic, client.ConsumeOptions{Wait: time.Second, Max: 10})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return got
		}
		for _, m := range msgs {
			b, err := m.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			got[string(b)] = m.ReceiptHandle
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRunServesAndRestartsGracefullyOnTheSameDataDir(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	n1 := startRun(t, devConfig(t, dir))
	if _, err := n1.c.CreateTopic(ctx, client.CreateTopicRequest{Name: "orders", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	for p, pl := range []string{"acked", "unacked"} {
		p := p
		if err := n1.c.Produce(ctx, "orders", []byte(pl), client.ProduceOptions{Partition: &p}); err != nil {
			t.Fatalf("produce %s: %v", pl, err)
		}
	}
	var got map[string]string
	deadline := time.Now().Add(20 * time.Second)
	for got = drain(t, n1.c, "orders"); len(got) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("consumed %v, want both messages", keys(got))
		}
		for k, v := range drain(t, n1.c, "orders") {
			got[k] = v
		}
	}
	if err := n1.c.Ack(ctx, "orders", got["acked"]); err != nil {
		t.Fatalf("ack: %v", err)
	}

	if err := n1.stop(t); err != nil {
		t.Fatalf("graceful Run returned %v, want nil", err)
	}
	// Every written partition was closed with a CLEAN high watermark.
	for p := 0; p < 2; p++ {
		b, err := os.ReadFile(filepath.Join(dir, "topics", "orders", fmt.Sprintf("p%05d", p), "hwm"))
		if err != nil || len(b) != 16 || b[11]&1 != 1 || b[7] != 1 {
			t.Fatalf("partition %d hwm after graceful shutdown: %x (err %v), want hwm 1 with CLEAN", p, b, err)
		}
	}

	n2 := startRun(t, devConfig(t, dir))
	topics, err := n2.c.AllTopics(ctx)
	if err != nil || len(topics) != 1 || topics[0].Name != "orders" || topics[0].Partitions != 3 {
		t.Fatalf("topics after restart: %+v (err %v)", topics, err)
	}
	for p, want := range []string{"acked", "unacked"} {
		p, off := p, int64(0)
		msgs, err := n2.c.Consume(ctx, "orders", client.ConsumeOptions{Partition: &p, Offset: &off})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("replay partition %d after restart: %+v (err %v)", p, msgs, err)
		}
		if b, _ := msgs[0].Bytes(); string(b) != want {
			t.Fatalf("replay partition %d: %q, want %q", p, b, want)
		}
	}
	// The ack survived the restart; the lease did not.
	if again := drain(t, n2.c, "orders"); len(again) != 1 || again["unacked"] == "" {
		t.Fatalf("redelivered after restart: %v, want only the unacked message", keys(again))
	}
	if err := n2.stop(t); err != nil {
		t.Fatalf("second graceful Run returned %v, want nil", err)
	}
}

// A Run that fails late in open (the HTTP port is taken) has closed what it opened: the
// metastore and the ingress WAL of the same data directory open again at once.
func TestRunThatFailsToOpenReleasesWhatItOpened(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := devConfig(t, dir)
	cfg.HTTPAddr = busy.Addr().String()
	var logs logBuffer
	if err := Run(context.Background(), cfg, &logs); err == nil || !strings.Contains(err.Error(), "http-addr") {
		t.Fatalf("Run on a taken HTTP port: %v, want an http-addr error", err)
	}
	n := startRun(t, devConfig(t, dir))
	if err := n.stop(t); err != nil {
		t.Fatalf("second Run: %v", err)
	}
}
