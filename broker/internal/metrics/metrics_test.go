package metrics

import (
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family is one row of docs/internals/metrics.md: name, type, label names (in any order) and, for
// histograms with specified buckets, the bucket upper bounds.
type family struct {
	name    string
	typ     dto.MetricType
	labels  []string
	buckets []float64
}

const (
	counter   = dto.MetricType_COUNTER
	gauge     = dto.MetricType_GAUGE
	histogram = dto.MetricType_HISTOGRAM
)

var (
	storageB = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1}
	tp       = []string{"topic", "partition"}
)

// golden is docs/internals/metrics.md §1–§8, family by family.
var golden = []family{
	// §1 HTTP
	{"narad_http_requests_total", counter, []string{"route", "method", "status"}, nil},
	{"narad_http_request_duration_seconds", histogram, []string{"route", "method", "status"}, prometheus.DefBuckets},
	{"narad_http_requests_in_flight", gauge, nil, nil},
	{"narad_http_request_bytes_in_total", counter, []string{"route"}, nil},
	{"narad_http_response_bytes_out_total", counter, []string{"route"}, nil},
	// §2 Traffic
	{"narad_messages_produced_total", counter, tp, nil},
	{"narad_bytes_produced_total", counter, tp, nil},
	{"narad_messages_consumed_total", counter, tp, nil},
	{"narad_bytes_consumed_total", counter, tp, nil},
	{"narad_produce_rejections_total", counter, []string{"topic", "reason"}, nil},
	{"narad_consume_wait_seconds", histogram, []string{"topic", "outcome"}, []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60}},
	{"narad_consume_empty_total", counter, []string{"topic"}, nil},
	// §3 Queue health
	{"narad_consumer_lag_messages", gauge, tp, nil},
	{"narad_consumer_dropped_messages", gauge, tp, nil},
	{"narad_oldest_unconsumed_message_age_seconds", gauge, tp, nil},
	{"narad_inflight_size", gauge, tp, nil},
	{"narad_acked_ahead_size", gauge, tp, nil},
	{"narad_ack_rejected_total", counter, []string{"reason"}, nil},
	{"narad_ack_extended_total", counter, []string{"topic"}, nil},
	{"narad_nack_total", counter, []string{"topic"}, nil},
	{"narad_consumer_corrupt_skipped_total", counter, tp, nil},
	// §4 Fan-out
	{"narad_fanout_lag_messages", gauge, []string{"parent", "child", "partition"}, nil},
	{"narad_fanout_due_lag_seconds", gauge, []string{"parent", "child", "partition"}, nil},
	{"narad_fanout_committed_total", counter, []string{"parent", "child"}, nil},
	{"narad_fanout_child_dropped_messages", counter, []string{"parent", "child"}, nil},
	{"narad_fanout_batch_records", histogram, nil, []float64{1, 8, 64, 256, 1024, 4096, 16384}},
	{"narad_fanout_batch_bytes", histogram, nil, []float64{1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456}},
	// §5 Storage engine
	{"narad_storage_flush_duration_seconds", histogram, tp, storageB},
	{"narad_storage_flush_bytes_total", counter, tp, nil},
	{"narad_storage_fsync_duration_seconds", histogram, tp, storageB},
	{"narad_storage_high_watermark_persist_duration_seconds", histogram, []string{"topic", "partition", "outcome"}, storageB},
	{"narad_storage_retention_bytes_deleted_total", counter, []string{"topic", "partition", "reason"}, nil},
	{"narad_storage_retention_messages_deleted_total", counter, []string{"topic", "partition", "reason"}, nil},
	{"narad_storage_retention_run_duration_seconds", histogram, tp, prometheus.DefBuckets},
	// §6 Disk and log accounting
	{"narad_data_dir_size_bytes", gauge, nil, nil},
	{"narad_data_dir_available_bytes", gauge, nil, nil},
	{"narad_data_dir_capacity_bytes", gauge, nil, nil},
	{"narad_topic_bytes", gauge, []string{"topic"}, nil},
	{"narad_partition_size_bytes", gauge, tp, nil},
	{"narad_segments", gauge, tp, nil},
	{"narad_open_partition_logs", gauge, nil, nil},
	{"narad_idle_logs_evicted_total", counter, nil, nil},
	// §7 Moves, decommission, quarantine
	{"narad_moves_inflight", gauge, nil, nil},
	{"narad_moves_total", counter, []string{"outcome"}, nil},
	{"narad_moves_duration_seconds", histogram, nil, []float64{0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}},
	{"narad_moves_bytes_total", counter, nil, nil},
	{"narad_moves_blocked", gauge, []string{"reason"}, nil},
	{"narad_decommission_blocked", gauge, []string{"node", "reason"}, nil},
	{"narad_quarantined_copies", gauge, nil, nil},
	{"narad_quarantined_bytes", gauge, nil, nil},
	{"narad_orphan_topic_dirs", gauge, nil, nil},
	// §8 Cluster and misc
	{"narad_topics_total", gauge, nil, nil},
	{"narad_partitions_total", gauge, nil, nil},
	{"narad_errors_total", counter, []string{"component", "kind"}, nil},
	{"narad_boot_duration_seconds", gauge, nil, nil},
	// Cluster-port authentication and connection caps (docs/operating.md, "Connection limits")
	{"narad_cluster_auth_total", counter, []string{"outcome"}, nil},
	{"narad_connections_refused_total", counter, []string{"port", "reason"}, nil},
	{"narad_http_handoffs_total", counter, nil, nil},
	{"narad_node_rpc_duration_seconds", histogram, []string{"method"}, nodeRPCBuckets},
	// Leader elections of replicated partitions (docs/internals/metrics.md §8)
	{"narad_leader_elections_total", counter, []string{"reason"}, nil},
	// Replicated partitions (docs/internals/metrics.md §8)
	{"narad_partition_replicas", gauge, tp, nil},
	{"narad_partition_isr", gauge, tp, nil},
	{"narad_under_replicated_partitions", gauge, nil, nil},
	{"narad_under_min_isr_partitions", gauge, nil, nil},
	{"narad_replica_lag_records", gauge, []string{"topic", "partition", "replica"}, nil},
	{"narad_isr_changes_total", counter, []string{"change"}, nil},
	{"narad_replication_bytes_total", counter, []string{"direction"}, nil},
	// Raft and members (docs/internals/metrics.md §8), read at scrape time
	{"narad_raft_leader", gauge, nil, nil},
	{"narad_raft_has_leader", gauge, nil, nil},
	{"narad_raft_voters", gauge, nil, nil},
	{"narad_raft_nonvoters", gauge, nil, nil},
	{"narad_raft_term", gauge, nil, nil},
	{"narad_raft_commit_index", gauge, nil, nil},
	{"narad_raft_applied_index", gauge, nil, nil},
	{"narad_raft_last_contact_seconds", gauge, nil, nil},
	{"narad_cluster_members", gauge, []string{"status"}, nil},
}

// proposed is docs/internals/metrics.md §9: optional, but if registered they must match.
var proposed = []family{
	{"narad_moves_freeze_seconds", histogram, nil, nil},
	{"narad_reconcile_passes_total", counter, []string{"loop", "kind"}, nil},
	{"narad_ingress_undispatched_records", gauge, nil, nil},
	// Not in §9, but registered (and now with zero series from the start).
	{"narad_dispatched_records_total", counter, []string{"destination"}, nil},
}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

// familyFields maps each family name to the Metrics field that registers it.
func familyFields(t *testing.T, m *Metrics) map[string]reflect.Value {
	t.Helper()
	out := map[string]reflect.Value{}
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !f.CanInterface() {
			continue // unexported bookkeeping (the DeleteTopic generation)
		}
		c, ok := f.Interface().(prometheus.Collector)
		if !ok || f.Type() == reflect.TypeOf(m.Registry) {
			continue
		}
		ch := make(chan *prometheus.Desc, 64) // ClusterCollector describes 9 families
		c.Describe(ch)
		close(ch)
		for d := range ch {
			sub := fqNameRE.FindStringSubmatch(d.String())
			if sub == nil {
				t.Fatalf("field %s: cannot read the name of %s", v.Type().Field(i).Name, d)
			}
			out[sub[1]] = f
		}
	}
	return out
}

// touch creates the series of a labelled family with the given label values; it fails the
// test if the family's label names differ from the map's keys.
func touch(t *testing.T, f reflect.Value, name string, labels prometheus.Labels) {
	t.Helper()
	meth := f.MethodByName("GetMetricWith")
	if !meth.IsValid() {
		if _, scraped := f.Interface().(*ClusterCollector); scraped {
			return // its series exist at every scrape (cluster.go)
		}
		t.Fatalf("%s: has labels in the spec but is not a vector", name)
	}
	res := meth.Call([]reflect.Value{reflect.ValueOf(labels)})
	if err, _ := res[1].Interface().(error); err != nil {
		t.Fatalf("%s: labels %v: %v", name, labels, err)
	}
}

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func labelNames(s *dto.Metric) []string {
	var out []string
	for _, lp := range s.GetLabel() {
		out = append(out, lp.GetName())
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

func TestEveryFamilyOfTheSpecIsRegisteredWithItsTypeAndLabels(t *testing.T) {
	m := New()
	cols := familyFields(t, m)
	for _, g := range golden {
		f, ok := cols[g.name]
		if !ok {
			t.Errorf("%s: not registered", g.name)
			continue
		}
		if len(g.labels) > 0 {
			l := prometheus.Labels{}
			for _, name := range g.labels {
				l[name] = "x"
			}
			touch(t, f, g.name, l)
		}
	}
	fams := gather(t, m)
	check := func(g family, required bool) {
		f, ok := fams[g.name]
		if !ok {
			if required {
				t.Errorf("%s: missing from the scrape", g.name)
			}
			return
		}
		if f.GetType() != g.typ {
			t.Errorf("%s: type %v, want %v", g.name, f.GetType(), g.typ)
		}
		if len(f.GetMetric()) == 0 {
			if len(g.labels) == 0 || required {
				t.Errorf("%s: no series after touching it", g.name)
			}
			return
		}
		s := f.GetMetric()[0]
		if got, want := labelNames(s), sorted(g.labels); !slices.Equal(got, want) {
			t.Errorf("%s: labels %v, want %v", g.name, got, want)
		}
		if g.buckets != nil {
			var got []float64
			for _, b := range s.GetHistogram().GetBucket() {
				got = append(got, b.GetUpperBound())
			}
			if !slices.Equal(got, g.buckets) {
				t.Errorf("%s: buckets %v, want %v", g.name, got, g.buckets)
			}
		}
	}
	known := map[string]bool{}
	for _, g := range golden {
		known[g.name] = true
		check(g, true)
	}
	for _, g := range proposed {
		known[g.name] = true
		check(g, false)
	}
	// Nothing outside the contract under the narad_ namespace.
	for name := range fams {
		if strings.HasPrefix(name, "narad_") && !known[name] {
			t.Errorf("%s: registered but not in spec/metrics.md", name)
		}
	}
	// The standard collectors are on the same registry.
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s: standard collector family missing", name)
		}
	}
}

func TestDeleteTopicRemovesEverySeriesNamingTheTopic(t *testing.T) {
	m := New()
	cols := familyFields(t, m)
	// Series for the doomed topic "t" in every role, and for survivors "u", "v".
	for _, g := range golden {
		if len(g.labels) == 0 {
			continue
		}
		var sets []map[string]string
		switch {
		case slices.Contains(g.labels, "topic"):
			sets = []map[string]string{{"topic": "t"}, {"topic": "u"}}
		case slices.Contains(g.labels, "parent"):
			sets = []map[string]string{{"parent": "t", "child": "u"}, {"parent": "u", "child": "t"}, {"parent": "u", "child": "v"}}
		default:
			sets = []map[string]string{{}} // no topic label: must survive untouched
		}
		for _, set := range sets {
			l := prometheus.Labels{}
			for _, name := range g.labels {
				if v, ok := set[name]; ok {
					l[name] = v
				} else if name == "reason" || name == "kind" || name == "outcome" {
					l[name] = "t" // a label value equal to the topic name in another label must not matter
				} else {
					l[name] = "0"
				}
			}
			touch(t, cols[g.name], g.name, l)
		}
	}
	before := gather(t, m)

	m.DeleteTopic("t")

	after := gather(t, m)
	for _, g := range golden {
		if len(g.labels) == 0 {
			continue
		}
		var left []string
		for _, s := range after[g.name].GetMetric() {
			for _, lp := range s.GetLabel() {
				if (lp.GetName() == "topic" || lp.GetName() == "parent" || lp.GetName() == "child") && lp.GetValue() == "t" {
					left = append(left, lp.GetName())
				}
			}
		}
		if len(left) > 0 {
			t.Errorf("%s: series with %v=\"t\" survive DeleteTopic", g.name, left)
		}
		// Exactly the series not naming "t" survive.
		want := len(before[g.name].GetMetric())
		switch {
		case slices.Contains(g.labels, "topic"):
			want = 1
		case slices.Contains(g.labels, "parent"):
			want = 1
		}
		if got := len(after[g.name].GetMetric()); got != want {
			t.Errorf("%s: %d series after DeleteTopic, want %d", g.name, got, want)
		}
	}
}

func TestPartitionLabelIsDecimal(t *testing.T) {
	for p, want := range map[int]string{0: "0", 3: "3", 107: "107"} {
		if got := Partition(p); got != want {
			t.Errorf("Partition(%d) = %q, want %q", p, got, want)
		}
	}
}

func TestNodeRPCObserverCountsOnlyTheServiceMethods(t *testing.T) {
	m := New()
	observe := m.NodeRPCObserver([]string{"ReplicaFetch", "AckBatch"})
	observe("ReplicaFetch", 2*time.Millisecond)
	observe("ReplicaFetch", 40*time.Millisecond)
	observe("NotAMethod", time.Millisecond)
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "narad_node_rpc_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			counts[s.GetLabel()[0].GetValue()] = s.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{"ReplicaFetch": 2, "AckBatch": 0} // AckBatch's series exists from the start
	if !maps.Equal(counts, want) {
		t.Fatalf("series %v, want %v", counts, want)
	}
}
