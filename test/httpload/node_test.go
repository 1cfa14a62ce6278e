package httpload_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"narad.dev/test/harness"
	"narad.dev/test/httpload"
)

// startNode starts a real single dev node from the built binary (NARAD_BIN or bin/narad) on
// host, which is in this package's loopback block (127.0.0.50-59).
func startNode(t *testing.T, host string) *harness.Node {
	t.Helper()
	n, err := harness.NewNode(harness.Options{Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := harness.FreePorts(host, 2)
	if err != nil {
		t.Fatal(err)
	}
	n.Host = host
	n.HTTPAddr = net.JoinHostPort(host, fmt.Sprint(ports[0]))
	n.ClusterAddr = net.JoinHostPort(host, fmt.Sprint(ports[1]))
	t.Cleanup(n.Cleanup)
	if err := n.StartReady(); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEveryAcceptedMessageIsConsumedOnceFromARealNode(t *testing.T) {
	n := startNode(t, "127.0.0.52")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := httpload.Config{Server: n.URL(), Topic: "load", Create: true, Partitions: 3, Count: 400, Size: 100,
		Workers: 8, Consumers: 8, Wait: time.Second, Timeout: time.Minute}
	res, err := httpload.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v (result %+v)", err, res)
	}
	if res.Produced != 400 || res.Acked != 400 || res.Lost != 0 || res.Unexpected != 0 || res.Foreign != 0 {
		t.Fatalf("result = %+v, want 400 produced and acked, none lost, unexpected or foreign", res)
	}
	if res.Consumed < 400 || res.ProduceErrors != 0 || res.FullFlowRate <= 0 || res.P99Ms <= 0 {
		t.Fatalf("result = %+v, want ≥ 400 consumed, no produce error, a rate and a p99", res)
	}
}

func TestLeftoversOfAnEarlierRunAreAckedAndCountedApart(t *testing.T) {
	n := startNode(t, "127.0.0.53")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := httpload.Config{Server: n.URL(), Topic: "load", Create: true, Partitions: 3, Count: 60, Size: 1024,
		Workers: 4, Wait: time.Second, Timeout: time.Minute}
	if res, err := httpload.Run(ctx, cfg); err != nil || res.Produced != 60 || res.Acked != 0 {
		t.Fatalf("produce-only run: %v (result %+v), want 60 produced, nothing acked", err, res)
	}
	cfg.Create, cfg.Count, cfg.Consumers = false, 100, 4
	res, err := httpload.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("full flow after leftovers: %v (result %+v)", err, res)
	}
	if res.Produced != 100 || res.Acked != 100 || res.Lost != 0 {
		t.Fatalf("result = %+v, want 100 produced and acked", res)
	}
	if res.Foreign != 60 {
		t.Fatalf("foreign = %d, want the 60 leftovers of the produce-only run", res.Foreign)
	}
}
