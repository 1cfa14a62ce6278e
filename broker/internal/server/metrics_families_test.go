package server

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/metrics"
)

// familiesWithoutKnownLabels are the families whose label values exist only during an event:
// narad_decommission_blocked{node,reason} is 1 for a draining node while it is blocked and
// removed when cleared (docs/operating.md, Metrics); narad_replica_lag_records{...,replica}
// exists only while this node leads a replicated partition (it has followers).
var familiesWithoutKnownLabels = []string{"narad_decommission_blocked", "narad_replica_lag_records"}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

// declaredFamilies lists the name of every family a metrics.Metrics registers.
func declaredFamilies(t *testing.T) []string {
	t.Helper()
	m := metrics.New()
	var out []string
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		if !v.Field(i).CanInterface() {
			continue // unexported bookkeeping
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok || v.Field(i).Type() == reflect.TypeOf(m.Registry) {
			continue
		}
		ch := make(chan *prometheus.Desc, 64) // metrics.ClusterCollector describes 9
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if sub := fqNameRE.FindStringSubmatch(d.String()); sub != nil {
				out = append(out, sub[1])
			}
		}
	}
	if len(out) < 50 {
		t.Fatalf("found only %d declared families: the reflection walk is broken", len(out))
	}
	return out
}

// TestEveryMetricFamilyExistsOnceATopicWithChildrenExists: a fresh node with one parent, a
// local child, a delay child and a remote child, and no produce or consume traffic, exposes
// every declared family (with a series), so absent() and rate() alerts work from the start.
func TestEveryMetricFamilyExistsOnceATopicWithChildrenExists(t *testing.T) {
	cfg := devConfig(t, t.TempDir())
	n := startRun(t, cfg)
	addr, _ := n.logs.field("narad ready", "http")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, req := range []client.CreateTopicRequest{
		{Name: "orders", Partitions: 3},
		{Name: "audit", Partitions: 3, Parent: "orders"},
		{Name: "later", Partitions: 3, Parent: "orders", FanoutDelayMs: 60_000},
		{Name: "mirror", Partitions: 3},
	} {
		if _, err := n.c.CreateTopic(ctx, req); err != nil {
			t.Fatalf("create %s: %v", req.Name, err)
		}
	}
	if _, err := n.c.AttachRemote(ctx, "orders", client.RemoteChild{URL: "http://" + addr, Topic: "mirror"}, 0, ""); err != nil {
		t.Fatalf("attach remote: %v", err)
	}

	want := slices.DeleteFunc(declaredFamilies(t), func(f string) bool { return slices.Contains(familiesWithoutKnownLabels, f) })
	var missing []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		page := scrape(t, "http://"+addr+"/metrics")
		missing = missing[:0]
		for _, f := range want {
			if !hasSeries(page, f) {
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("families without a series on a node with a parent and children: %v", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hasSeries reports whether the exposition page has a sample of family f.
func hasSeries(page, f string) bool {
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, " ")
		name, _, _ = strings.Cut(name, "{")
		if name == f || name == f+"_count" || name == f+"_bucket" || name == f+"_sum" {
			return true
		}
	}
	return false
}
