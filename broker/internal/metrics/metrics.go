// Package metrics defines every Prometheus family of docs/internals/metrics.md on one registry per
// process. Names, types and label sets here are part of the contract (MT-1 checks them).
// Lower layers never import this package: they report through small observer interfaces
// that the engine adapts to these collectors.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// storageBuckets are the storage latency buckets of docs/internals/metrics.md §5.
// nodeRPCBuckets spans a node RPC call from a fraction of a millisecond (a forwarded ack) to a
// follower's fetch or a consume probe parked for its whole wait.
var nodeRPCBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1, 5, 30}

var storageBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1}

// Metrics holds every collector. Create one with New per process.
type Metrics struct {
	Registry *prometheus.Registry
	// gen counts DeleteTopic calls: PartitionSeries resolves its handles again when it moves.
	gen atomic.Uint64

	HTTPRequests        *prometheus.CounterVec
	HTTPDuration        *prometheus.HistogramVec
	HTTPInFlight        prometheus.Gauge
	HTTPBytesIn         *prometheus.CounterVec
	HTTPBytesOut        *prometheus.CounterVec
	MessagesProduced    *prometheus.CounterVec
	BytesProduced       *prometheus.CounterVec
	MessagesConsumed    *prometheus.CounterVec
	BytesConsumed       *prometheus.CounterVec
	ProduceRejections   *prometheus.CounterVec
	ConsumeWait         *prometheus.HistogramVec
	ConsumeEmpty        *prometheus.CounterVec
	ConsumerLag         *prometheus.GaugeVec
	ConsumerDropped     *prometheus.GaugeVec
	OldestUnconsumedAge *prometheus.GaugeVec
	InflightSize        *prometheus.GaugeVec
	AckedAheadSize      *prometheus.GaugeVec
	AckRejected         *prometheus.CounterVec
	AckExtended         *prometheus.CounterVec
	Nacks               *prometheus.CounterVec
	CorruptSkipped      *prometheus.CounterVec

	FanoutLag          *prometheus.GaugeVec
	FanoutDueLag       *prometheus.GaugeVec
	FanoutCommitted    *prometheus.CounterVec
	FanoutDropped      *prometheus.CounterVec
	FanoutBatchRecords prometheus.Histogram
	FanoutBatchBytes   prometheus.Histogram

	FanoutRemoteLag        *prometheus.GaugeVec
	FanoutRemoteDueLag     *prometheus.GaugeVec
	FanoutRemoteSentBytes  *prometheus.CounterVec
	FanoutRemoteSendErrors *prometheus.CounterVec

	StorageFlushDuration     *prometheus.HistogramVec
	StorageFlushBytes        *prometheus.CounterVec
	StorageFsyncDuration     *prometheus.HistogramVec
	StorageHWMPersist        *prometheus.HistogramVec
	RetentionBytesDeleted    *prometheus.CounterVec
	RetentionMessagesDeleted *prometheus.CounterVec
	RetentionRunDuration     *prometheus.HistogramVec

	DataDirSize         prometheus.Gauge
	DataDirAvailable    prometheus.Gauge
	DataDirCapacity     prometheus.Gauge
	TopicBytes          *prometheus.GaugeVec
	PartitionSize       *prometheus.GaugeVec
	Segments            *prometheus.GaugeVec
	OpenPartitionLogs   prometheus.Gauge
	IdleLogsEvicted     prometheus.Counter
	MovesInflight       prometheus.Gauge
	MovesTotal          *prometheus.CounterVec
	MovesDuration       prometheus.Histogram
	MovesFreeze         prometheus.Histogram
	MovesBytes          prometheus.Counter
	MovesBlocked        *prometheus.GaugeVec
	DecommissionBlocked *prometheus.GaugeVec
	QuarantinedCopies   prometheus.Gauge
	QuarantinedBytes    prometheus.Gauge
	OrphanTopicDirs     prometheus.Gauge

	TopicsTotal         prometheus.Gauge
	PartitionsTotal     prometheus.Gauge
	Errors              *prometheus.CounterVec
	BootDuration        prometheus.Gauge
	IngressUndispatched prometheus.Gauge
	DispatchedRecords   *prometheus.CounterVec

	// Cluster-port authentication and connection caps (docs/operating.md, "Connection limits").
	ClusterAuth        *prometheus.CounterVec
	ConnectionsRefused *prometheus.CounterVec
	// HTTPHandoffs counts client connections the fast HTTP path handed to net/http.
	HTTPHandoffs prometheus.Counter
	// NodeRPCDuration is how long the node RPC calls this node served took, by method; its
	// _count is the calls (NodeRPCObserver feeds it).
	NodeRPCDuration *prometheus.HistogramVec

	// LeaderElections counts the leader elections of replicated partitions made by this
	// node's controller while it led, by reason (docs/internals/replication.md §7, §9).
	LeaderElections *prometheus.CounterVec

	// Replicated partitions (docs/internals/metrics.md §8, docs/internals/replication.md §6):
	// the per-partition gauges cover the partitions this node leads (owns), set by the
	// engine's poller; the counters count this node's ISR changes and replication traffic.
	PartitionReplicas *prometheus.GaugeVec
	PartitionISR      *prometheus.GaugeVec
	UnderReplicated   prometheus.Gauge
	UnderMinISR       prometheus.Gauge
	ReplicaLag        *prometheus.GaugeVec
	ISRChanges        *prometheus.CounterVec
	ReplicationBytes  *prometheus.CounterVec

	// Cluster is the Raft and membership families (cluster.go), read at scrape time from
	// the ClusterSource the process binds once its metastore is open.
	Cluster *ClusterCollector
}

// New registers every family on a fresh registry, plus the Go and process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	f := factory{r}
	m := &Metrics{Registry: r}
	rmS := []string{"route", "method", "status"}
	tp := []string{"topic", "partition"}

	m.HTTPRequests = f.counterVec("narad_http_requests_total", "HTTP requests by matched route, method and status.", rmS)
	m.HTTPDuration = f.histVec("narad_http_request_duration_seconds", "HTTP request latency.", prometheus.DefBuckets, rmS)
	m.HTTPInFlight = f.gauge("narad_http_requests_in_flight", "HTTP requests being served.")
	m.HTTPBytesIn = f.counterVec("narad_http_request_bytes_in_total", "Request bytes by route (Content-Length).", []string{"route"})
	m.HTTPBytesOut = f.counterVec("narad_http_response_bytes_out_total", "Response bytes by route.", []string{"route"})

	m.MessagesProduced = f.counterVec("narad_messages_produced_total", "Records committed on this owner.", tp)
	m.BytesProduced = f.counterVec("narad_bytes_produced_total", "Payload bytes committed on this owner.", tp)
	m.MessagesConsumed = f.counterVec("narad_messages_consumed_total", "Records returned by consume (queue or replay).", tp)
	m.BytesConsumed = f.counterVec("narad_bytes_consumed_total", "Payload bytes returned by consume.", tp)
	m.ProduceRejections = f.counterVec("narad_produce_rejections_total", "Produces refused, by reason.", []string{"topic", "reason"})
	m.ConsumeWait = f.histVec("narad_consume_wait_seconds", "Long-poll time of consumes.", []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60}, []string{"topic", "outcome"})
	m.ConsumeEmpty = f.counterVec("narad_consume_empty_total", "Consumes answered 204.", []string{"topic"})

	m.ConsumerLag = f.gaugeVec("narad_consumer_lag_messages", "hwm - (committed frontier + 1).", tp)
	m.ConsumerDropped = f.gaugeVec("narad_consumer_dropped_messages", "Unacked records already removed by retention.", tp)
	m.OldestUnconsumedAge = f.gaugeVec("narad_oldest_unconsumed_message_age_seconds", "Seconds since the oldest unconsumed record (consumer frontier + 1) was committed; 0 when nothing is unconsumed.", tp)
	m.InflightSize = f.gaugeVec("narad_inflight_size", "Live reservations.", tp)
	m.AckedAheadSize = f.gaugeVec("narad_acked_ahead_size", "Acked-ahead set size.", tp)
	m.AckRejected = f.counterVec("narad_ack_rejected_total", "Acks refused: stale (410) or cap (503).", []string{"reason"})
	m.AckExtended = f.counterVec("narad_ack_extended_total", "Lease extensions granted.", []string{"topic"})
	m.Nacks = f.counterVec("narad_nack_total", "Nacks.", []string{"topic"})
	m.CorruptSkipped = f.counterVec("narad_consumer_corrupt_skipped_total", "Unreadable records skipped by consumers (recorded loss).", tp)

	pcp := []string{"parent", "child", "partition"}
	m.FanoutLag = f.gaugeVec("narad_fanout_lag_messages", "Parent hwm - cursor next offset; refreshed every second while a slab is being retried.", pcp)
	m.FanoutDueLag = f.gaugeVec("narad_fanout_due_lag_seconds", "Seconds a delay cursor runs behind its due frontier.", pcp)
	m.FanoutCommitted = f.counterVec("narad_fanout_committed_total", "Records committed into a child.", []string{"parent", "child"})
	m.FanoutDropped = f.counterVec("narad_fanout_child_dropped_messages", "Records a child lost (drop-behind or unreadable).", []string{"parent", "child"})
	m.FanoutBatchRecords = f.hist("narad_fanout_batch_records", "Records per committed fan-out slab.", []float64{1, 8, 64, 256, 1024, 4096, 16384})
	m.FanoutBatchBytes = f.hist("narad_fanout_batch_bytes", "Payload bytes per committed fan-out slab.", prometheus.ExponentialBuckets(1024, 4, 10))
	m.FanoutRemoteLag = f.gaugeVec("narad_fanout_remote_lag_messages", "Parent hwm - remote link cursor next offset.", pcp)
	m.FanoutRemoteDueLag = f.gaugeVec("narad_fanout_remote_due_lag_seconds", "Seconds the oldest unsent record of a remote link has been due.", pcp)
	m.FanoutRemoteSentBytes = f.counterVec("narad_fanout_remote_sent_bytes_total", "Key + payload bytes a remote link's target accepted (202).", []string{"parent", "child"})
	m.FanoutRemoteSendErrors = f.counterVec("narad_fanout_remote_send_errors_total", "Remote link slabs the target did not fully accept, by link state.", []string{"parent", "child", "state"})

	m.StorageFlushDuration = f.histVec("narad_storage_flush_duration_seconds", "Segment write time per commit.", storageBuckets, tp)
	m.StorageFlushBytes = f.counterVec("narad_storage_flush_bytes_total", "Bytes written to segments.", tp)
	m.StorageFsyncDuration = f.histVec("narad_storage_fsync_duration_seconds", "Segment fsync time.", storageBuckets, tp)
	m.StorageHWMPersist = f.histVec("narad_storage_high_watermark_persist_duration_seconds", "hwm file persist time.", storageBuckets, []string{"topic", "partition", "outcome"})
	m.RetentionBytesDeleted = f.counterVec("narad_storage_retention_bytes_deleted_total", "Bytes deleted by retention.", []string{"topic", "partition", "reason"})
	m.RetentionMessagesDeleted = f.counterVec("narad_storage_retention_messages_deleted_total", "Records deleted by retention.", []string{"topic", "partition", "reason"})
	m.RetentionRunDuration = f.histVec("narad_storage_retention_run_duration_seconds", "Retention pass time.", prometheus.DefBuckets, tp)

	m.DataDirSize = f.gauge("narad_data_dir_size_bytes", "Bytes of regular files under the data dir.")
	m.DataDirAvailable = f.gauge("narad_data_dir_available_bytes", "Free bytes of the data dir's filesystem.")
	m.DataDirCapacity = f.gauge("narad_data_dir_capacity_bytes", "Total bytes of the data dir's filesystem.")
	m.TopicBytes = f.gaugeVec("narad_topic_bytes", "Bytes of a topic's partitions owned here.", []string{"topic"})
	m.PartitionSize = f.gaugeVec("narad_partition_size_bytes", "Partition size on disk.", tp)
	m.Segments = f.gaugeVec("narad_segments", "Segment files of a partition.", tp)
	m.OpenPartitionLogs = f.gauge("narad_open_partition_logs", "Partition logs open on this node.")
	m.IdleLogsEvicted = f.counter("narad_idle_logs_evicted_total", "Partition logs closed for idleness.")

	m.MovesInflight = f.gauge("narad_moves_inflight", "Move workers running on this destination.")
	m.MovesTotal = f.counterVec("narad_moves_total", "Moves finished on this destination.", []string{"outcome"})
	m.MovesDuration = f.hist("narad_moves_duration_seconds", "Move worker start to flip.", prometheus.ExponentialBuckets(0.25, 2, 14))
	m.MovesFreeze = f.hist("narad_moves_freeze_seconds", "Source freeze length per move, arm to flip.", prometheus.ExponentialBuckets(0.001, 2, 16))
	m.MovesBytes = f.counter("narad_moves_bytes_total", "Bytes copied by completed moves.")
	m.MovesBlocked = f.gaugeVec("narad_moves_blocked", "Moves currently blocked, by reason.", []string{"reason"})
	m.DecommissionBlocked = f.gaugeVec("narad_decommission_blocked", "1 while a node's decommission is blocked by reason.", []string{"node", "reason"})
	m.QuarantinedCopies = f.gauge("narad_quarantined_copies", "Copies set aside instead of deleted.")
	m.QuarantinedBytes = f.gauge("narad_quarantined_bytes", "Bytes of quarantined copies.")
	m.OrphanTopicDirs = f.gauge("narad_orphan_topic_dirs", "Topic dirs without an incarnation marker whose topic is unknown.")

	m.TopicsTotal = f.gauge("narad_topics_total", "Topics in the local replica.")
	m.PartitionsTotal = f.gauge("narad_partitions_total", "Partitions in the local replica.")
	m.Errors = f.counterVec("narad_errors_total", "Errors by component and kind.", []string{"component", "kind"})
	m.BootDuration = f.gauge("narad_boot_duration_seconds", "Process start to API listener up.")
	m.IngressUndispatched = f.gauge("narad_ingress_undispatched_records", "Accepted produces not yet committed at their owners.")
	m.DispatchedRecords = f.counterVec("narad_dispatched_records_total", "Accepted records the dispatcher committed at their owner, by destination: local (this node) or remote (CommitProduceBatch to another node).", []string{"destination"})

	m.ClusterAuth = f.counterVec("narad_cluster_auth_total", "Cluster-port handshakes by outcome: accepted, or refused (wrong secret, malformed, timed out, failed TLS).", []string{"outcome"})
	m.ConnectionsRefused = f.counterVec("narad_connections_refused_total", "Connections closed at accept for being over a connection cap, by port (http, cluster) and reason (max_connections, max_connections_per_ip).", []string{"port", "reason"})
	m.HTTPHandoffs = f.counter("narad_http_handoffs_total", "Client connections the fast HTTP/1.1 path handed to net/http at their first request of another shape or route.")
	m.NodeRPCDuration = f.histVec("narad_node_rpc_duration_seconds", "Node RPC calls this node served, by method, and how long each ran (a stream its whole life).", nodeRPCBuckets, []string{"method"})
	m.LeaderElections = f.counterVec("narad_leader_elections_total", "Leader elections of replicated partitions made by this node's controller, by reason.", []string{"reason"})
	m.PartitionReplicas = f.gaugeVec("narad_partition_replicas", "Replicas in the replica list of a partition this node leads (1 when unreplicated).", tp)
	m.PartitionISR = f.gaugeVec("narad_partition_isr", "In-sync replicas of a partition this node leads (1 when unreplicated).", tp)
	m.UnderReplicated = f.gauge("narad_under_replicated_partitions", "Partitions this node leads with fewer in-sync replicas than their replication factor.")
	m.UnderMinISR = f.gauge("narad_under_min_isr_partitions", "Partitions this node leads with fewer in-sync replicas than min_insync_replicas (they refuse produce).")
	m.ReplicaLag = f.gaugeVec("narad_replica_lag_records", "Records a follower is behind the leader's log end, on the leader.", []string{"topic", "partition", "replica"})
	m.ISRChanges = f.counterVec("narad_isr_changes_total", "ISR changes this node's leaderships made, by change (shrink, expand).", []string{"change"})
	m.ReplicationBytes = f.counterVec("narad_replication_bytes_total", "Bytes of log frames copied between replicas: in (fetched or segment-pre-copied as follower), out (served as leader in fetch answers).", []string{"direction"})
	for _, o := range []string{"accepted", "refused"} {
		m.ClusterAuth.WithLabelValues(o)
	}
	for _, p := range []string{"http", "cluster"} {
		for _, r := range []string{"max_connections", "max_connections_per_ip"} {
			m.ConnectionsRefused.WithLabelValues(p, r)
		}
	}

	m.Cluster = newClusterCollector()
	r.MustRegister(m.Cluster)
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.initKnown()
	return m
}

// Label values known before any event (docs/operating.md, Metrics): their series exist at
// zero from the start, so absent() and rate() alerts work before the first event.
var (
	// ErrorKinds are the narad_errors_total {component, kind} pairs the broker counts.
	ErrorKinds = [][2]string{
		{"http", "5xx"},
		{"messaging", "partition_open"}, {"messaging", "append"},
		{"ingress", "append"}, {"ingress", "discard_deleted_topic"},
		{"metrics", "data_dir_size"}, {"metrics", "data_dir_available"},
		{"fanout", "cursor_corrupt"},
	}
	// ProduceRejectReasons are the narad_produce_rejections_total reasons.
	ProduceRejectReasons = []string{"schema", "delayed_child", "draining"}
	// ConsumeWaitOutcomes are the narad_consume_wait_seconds outcomes.
	ConsumeWaitOutcomes = []string{"hit", "timeout", "cancelled"}
	ackRejectReasons    = []string{"stale", "cap"}
	moveOutcomes        = []string{"completed", "force_promoted"}
	moveBlockedReasons  = []string{"source_dead", "target_dead", "copy_unverifiable", "source_dead_copy_behind"}
	dispatchDests       = []string{"local", "remote"}
	hwmPersistOutcomes  = []string{"ok", "error"}
	retentionReasons    = []string{"age"}
)

// ElectionReasons are the narad_leader_elections_total reasons, meta's Elect* values.
var ElectionReasons = []string{"dead", "shutdown", "preferred", "unclean", "reassign"}

// ISR change kinds (narad_isr_changes_total) and replication directions
// (narad_replication_bytes_total).
const (
	ISRShrink      = "shrink"
	ISRExpand      = "expand"
	ReplicationIn  = "in"
	ReplicationOut = "out"
)

var (
	isrChanges            = []string{ISRShrink, ISRExpand}
	replicationDirections = []string{ReplicationIn, ReplicationOut}
)

// initKnown creates the zero series of every label set known without a topic.
func (m *Metrics) initKnown() {
	for _, ck := range ErrorKinds {
		m.Errors.WithLabelValues(ck[0], ck[1])
	}
	for _, r := range ackRejectReasons {
		m.AckRejected.WithLabelValues(r)
	}
	for _, o := range moveOutcomes {
		m.MovesTotal.WithLabelValues(o)
	}
	for _, r := range moveBlockedReasons {
		m.MovesBlocked.WithLabelValues(r)
	}
	for _, d := range dispatchDests {
		m.DispatchedRecords.WithLabelValues(d)
	}
	for _, r := range ElectionReasons {
		m.LeaderElections.WithLabelValues(r)
	}
	for _, c := range isrChanges {
		m.ISRChanges.WithLabelValues(c)
	}
	for _, d := range replicationDirections {
		m.ReplicationBytes.WithLabelValues(d)
	}
}

// NodeRPCObserver returns the rpc.WithCallObserver function that feeds NodeRPCDuration, with a
// series made at once for each of methods (the node RPC service's, a fixed set) and its handle
// kept, so a call costs a map read and an observation. A method not in methods is not counted.
func (m *Metrics) NodeRPCObserver(methods []string) func(method string, d time.Duration) {
	obs := make(map[string]prometheus.Observer, len(methods))
	for _, name := range methods {
		obs[name] = m.NodeRPCDuration.WithLabelValues(name)
	}
	return func(method string, d time.Duration) {
		if o, ok := obs[method]; ok {
			o.Observe(d.Seconds())
		}
	}
}

// InitPartition creates the zero series of a partition this node owns (called when its log
// opens): its traffic and storage counters and histograms, and its topic's. Gauges are set by
// their pollers.
func (m *Metrics) InitPartition(topic, partition string) {
	for _, c := range []*prometheus.CounterVec{m.MessagesProduced, m.BytesProduced, m.MessagesConsumed,
		m.BytesConsumed, m.CorruptSkipped, m.StorageFlushBytes} {
		c.WithLabelValues(topic, partition)
	}
	for _, h := range []*prometheus.HistogramVec{m.StorageFlushDuration, m.StorageFsyncDuration, m.RetentionRunDuration} {
		h.WithLabelValues(topic, partition)
	}
	for _, o := range hwmPersistOutcomes {
		m.StorageHWMPersist.WithLabelValues(topic, partition, o)
	}
	for _, r := range retentionReasons {
		m.RetentionBytesDeleted.WithLabelValues(topic, partition, r)
		m.RetentionMessagesDeleted.WithLabelValues(topic, partition, r)
	}
	for _, r := range ProduceRejectReasons {
		m.ProduceRejections.WithLabelValues(topic, r)
	}
	for _, o := range ConsumeWaitOutcomes {
		m.ConsumeWait.WithLabelValues(topic, o)
	}
	m.ConsumeEmpty.WithLabelValues(topic)
	m.AckExtended.WithLabelValues(topic)
	m.Nacks.WithLabelValues(topic)
}

// InitLink creates the zero counters of a local fan-out link (called when its cursor starts).
func (m *Metrics) InitLink(parent, child string) {
	m.FanoutCommitted.WithLabelValues(parent, child)
	m.FanoutDropped.WithLabelValues(parent, child)
}

// InitRemoteLink creates the zero counters of a remote link: sent bytes, and send errors for
// each failure state.
func (m *Metrics) InitRemoteLink(parent, child string, states []string) {
	m.FanoutRemoteSentBytes.WithLabelValues(parent, child)
	for _, st := range states {
		m.FanoutRemoteSendErrors.WithLabelValues(parent, child, st)
	}
}

// DeleteTopic removes every series carrying topic as topic, parent or child (series hygiene).
func (m *Metrics) DeleteTopic(topic string) {
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{
		m.MessagesProduced, m.BytesProduced, m.MessagesConsumed, m.BytesConsumed, m.ProduceRejections,
		m.ConsumeWait, m.ConsumeEmpty, m.ConsumerLag, m.ConsumerDropped, m.OldestUnconsumedAge,
		m.InflightSize, m.AckedAheadSize, m.AckExtended, m.Nacks, m.CorruptSkipped,
		m.StorageFlushDuration, m.StorageFlushBytes, m.StorageFsyncDuration, m.StorageHWMPersist,
		m.RetentionBytesDeleted, m.RetentionMessagesDeleted, m.RetentionRunDuration,
		m.TopicBytes, m.PartitionSize, m.Segments, m.PartitionReplicas, m.PartitionISR, m.ReplicaLag,
	} {
		v.DeletePartialMatch(prometheus.Labels{"topic": topic})
	}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.FanoutLag, m.FanoutDueLag, m.FanoutCommitted, m.FanoutDropped,
		m.FanoutRemoteLag, m.FanoutRemoteDueLag, m.FanoutRemoteSentBytes, m.FanoutRemoteSendErrors} {
		v.DeletePartialMatch(prometheus.Labels{"parent": topic})
		v.DeletePartialMatch(prometheus.Labels{"child": topic})
	}
	m.gen.Add(1) // after the deletes: a handle resolved meanwhile is resolved again
}

// Partition formats a partition index as a label value.
func Partition(p int) string { return strconv.Itoa(p) }

type factory struct{ r *prometheus.Registry }

func (f factory) counterVec(name, help string, labels []string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.r.MustRegister(c)
	return c
}

func (f factory) gaugeVec(name, help string, labels []string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.r.MustRegister(g)
	return g
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.r.MustRegister(g)
	return g
}

func (f factory) histVec(name, help string, buckets []float64, labels []string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.r.MustRegister(h)
	return h
}

func (f factory) hist(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.r.MustRegister(h)
	return h
}
