// Package config resolves the configuration of `narad serve` (docs/internals/http-api.md §3) from command-line
// flags, NARAD_* environment variables, an optional YAML or JSON file and defaults, in that order
// of precedence, and validates it. Every error is one line naming the offending field:
// "config: <field>: <reason>".
package config

import (
	"log/slog"
	"time"
)

// Serve is the validated configuration of one broker process. Load returns it only when every
// rule below holds; the units are in the field types or names.
type Serve struct {
	Dev           bool     // one node on loopback, security off, text logs
	DataDir       string   // data directory (non-empty)
	HTTPAddr      string   // client API listen host:port
	ClusterAddr   string   // node RPC + Raft listen host:port
	AdvertiseAddr string   // host:port peers dial; "" = derived by the server
	NodeID        string   // [A-Za-z0-9._-]{1,255}; default the host name
	Join          []string // peer host:port list; needs a cluster secret
	Bootstrap     bool     // bootstrap a new cluster when the disk is empty
	LogLevel      string   // debug | info | warn | error
	LogFormat     string   // json | text
	PprofAddr     string   // "" = pprof off

	SecurityEnabled bool   // HTTP Basic + RBAC on the client API
	AdminUser       string // root admin seeded at first start (username rule)
	AdminPassword   string // ≤ 72 bytes; "" = random, logged once
	ClusterSecret   string // node-to-node credential; never from the config file in plain text
	// TrustedProxies are IPs or CIDR prefixes (each parses) of reverse proxies whose
	// X-Forwarded-For the failed-login throttle believes; empty = none.
	TrustedProxies []string
	// Warnings are settings accepted but unsafe (a secret given as a flag with --dev), for the
	// server to log at warn level once it has a logger.
	Warnings []string

	StorageCodec            string // none | zstd
	StorageCompressionLevel string // fastest | default | better | best

	// MaxConsumeWait is the long-poll ceiling: ≥ 0, < HTTPWriteTimeout, ≤ ShutdownGrace.
	MaxConsumeWait          time.Duration
	TopicDefaultPartitions  int           // 3 … TopicMaxPartitions
	TopicMaxPartitions      int           // 3 … 108
	TopicDefaultRetentionMs int64         // 0 (forever) or ≥ 3,600,000
	IdleLogEviction         time.Duration // ≥ 0; 0 disables
	ShutdownGrace           time.Duration // > 0
	HTTPReadTimeout         time.Duration // > 0
	HTTPWriteTimeout        time.Duration // > 0; must exceed MaxConsumeWait
	HTTPIdleTimeout         time.Duration // > 0
	// HTTPFastPath serves plain-HTTP produce, consume and ack requests of the common shape
	// on the leaner HTTP/1.1 path (internal/httpfast); net/http serves everything else.
	HTTPFastPath bool

	// TLSCertFile and TLSKeyFile are PEM files, both set or both empty (checked to load as a
	// pair). When set, the HTTP API serves HTTPS and the cluster port uses TLS with this
	// certificate.
	TLSCertFile string
	TLSKeyFile  string
	// ClusterTLSCAFile is the PEM CA (≥ 1 certificate) that signs every node certificate; when
	// set (only together with TLSCertFile/TLSKeyFile) the cluster port runs mutual TLS.
	ClusterTLSCAFile string

	// InitialMembers are the node IDs allowed to bootstrap on an empty disk (each a valid node
	// ID); empty = every node may bootstrap (docs/internals/metastore.md §11).
	InitialMembers []string
	// RemoteAllowedHosts are the targets remote fan-out children may reach: host names,
	// host:port or CIDRs (hostlist syntax); empty = any host (docs/operating.md, Security).
	RemoteAllowedHosts []string
	// HeartbeatInterval is the member upsert period (> 0, default 5 s); HeartbeatTimeout the
	// heartbeat age after which a member is dead (> HeartbeatInterval, default 30 s).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// ForcePromoteAfter and DeadTargetAbortAfter are the move failure timers (> 0, default
	// 2 min each, docs/internals/moves.md §8, §10).
	ForcePromoteAfter    time.Duration
	DeadTargetAbortAfter time.Duration
	// ReplicaFailoverAfter is the heartbeat silence after which the controller replaces the
	// leader of a replicated partition (1 s … 5 min and above HeartbeatInterval, default
	// 10 s, docs/internals/replication.md §7). The leader's value applies.
	ReplicaFailoverAfter time.Duration
	// ReReplicateAfter is how long a member stays dead, on the leader's clock, before its
	// replicas of replicated partitions are rebuilt elsewhere (0 = never, default 10 min,
	// docs/internals/replication.md §9). The leader's value applies.
	ReReplicateAfter time.Duration
	// DefaultReplicationFactor is the replication factor of a topic whose create does not
	// name one (1 … 5, default 1: unreplicated).
	DefaultReplicationFactor int
	// DefaultMinInsyncReplicas is the min_insync_replicas of a replicated topic whose create
	// does not name one, capped at its replication factor (0 … 5, default 0: min(2, R)). The
	// Raft leader's value applies.
	DefaultMinInsyncReplicas int
	// RackFile is the file Rack was read from (--rack-file), "" when none.
	RackFile string
	// Rack is this node's failure domain, stored in its member record ("" = none: a rack of
	// its own); placement puts a partition's replicas on distinct racks (docs/replication.md,
	// Racks). At most MaxRackLen characters of A-Z a-z 0-9 . _ -.
	Rack string
	// MaxInflightRequestBytes is the budget of produce body bytes held at once (≥ 8 MiB,
	// default 256 MiB); a produce over it is answered 503 with Retry-After.
	MaxInflightRequestBytes int64
	// MaxInflightAnswerBytes is the budget of message bytes held in consume and replay
	// answers at once (≥ 8 MiB, default 256 MiB); a consume that finds it spent is answered
	// 503 with Retry-After.
	MaxInflightAnswerBytes int64

	// FanoutMaxBatchRecords (1 … 65,536, default 4,096) and FanoutMaxBatchBytes (1 KiB …
	// 8 MiB, default 4 MiB) cap one fan-out slab (seed: fanout.max_batch_records / _bytes).
	FanoutMaxBatchRecords int
	FanoutMaxBatchBytes   int
	// MaxMovesInFlight is the leader's budget of partition moves at once (1 … 256, default 8,
	// MaxInFlightMoves); MinVoters the voters it keeps and a decommission must leave (odd,
	// 1 … 9, default 3). The leader's values apply: set them alike on every node.
	MaxMovesInFlight int
	MinVoters        int
	// Connection caps: HTTP port and cluster port, in total and per remote IP (each ≥ 1,
	// per-IP ≤ total).
	MaxConnections             int
	MaxConnectionsPerIP        int
	ClusterMaxConnections      int
	ClusterMaxConnectionsPerIP int

	ConfigFile string // the file read, "" = none
}

// LogValue renders the configuration for a startup log line with the secrets redacted.
func (s Serve) LogValue() slog.Value {
	redact := func(v string) string {
		if v == "" {
			return ""
		}
		return "<redacted>"
	}
	return slog.GroupValue(
		slog.Bool("dev", s.Dev),
		slog.String("data_dir", s.DataDir),
		slog.String("http_addr", s.HTTPAddr),
		slog.String("cluster_addr", s.ClusterAddr),
		slog.String("advertise_addr", s.AdvertiseAddr),
		slog.String("node", s.NodeID),
		slog.Any("join", s.Join),
		slog.Bool("bootstrap", s.Bootstrap),
		slog.String("log_level", s.LogLevel),
		slog.String("log_format", s.LogFormat),
		slog.String("pprof_addr", s.PprofAddr),
		slog.Bool("security_enabled", s.SecurityEnabled),
		slog.String("admin_user", s.AdminUser),
		slog.String("admin_password", redact(s.AdminPassword)),
		slog.String("cluster_secret", redact(s.ClusterSecret)),
		slog.String("storage_codec", s.StorageCodec),
		slog.String("storage_compression_level", s.StorageCompressionLevel),
		slog.Duration("max_consume_wait", s.MaxConsumeWait),
		slog.Int("topic_default_partitions", s.TopicDefaultPartitions),
		slog.Int("topic_max_partitions", s.TopicMaxPartitions),
		slog.Int64("topic_default_retention_ms", s.TopicDefaultRetentionMs),
		slog.Duration("idle_log_eviction", s.IdleLogEviction),
		slog.Duration("shutdown_grace", s.ShutdownGrace),
		slog.Duration("http_read_timeout", s.HTTPReadTimeout),
		slog.Duration("http_write_timeout", s.HTTPWriteTimeout),
		slog.Duration("http_idle_timeout", s.HTTPIdleTimeout),
		slog.Bool("http_fast_path", s.HTTPFastPath),
		slog.String("tls_cert", s.TLSCertFile),
		slog.String("tls_key", s.TLSKeyFile),
		slog.String("cluster_tls_ca", s.ClusterTLSCAFile),
		slog.Any("initial_members", s.InitialMembers),
		slog.Any("remote_allowed_hosts", s.RemoteAllowedHosts),
		slog.Any("trusted_proxies", s.TrustedProxies),
		slog.Duration("heartbeat_interval", s.HeartbeatInterval),
		slog.Duration("heartbeat_timeout", s.HeartbeatTimeout),
		slog.Int("max_connections", s.MaxConnections),
		slog.Int("max_connections_per_ip", s.MaxConnectionsPerIP),
		slog.Int("cluster_max_connections", s.ClusterMaxConnections),
		slog.Int("cluster_max_connections_per_ip", s.ClusterMaxConnectionsPerIP),
		slog.Duration("move_force_promote_after", s.ForcePromoteAfter),
		slog.Duration("move_dead_target_abort_after", s.DeadTargetAbortAfter),
		slog.Duration("replica_failover_after", s.ReplicaFailoverAfter),
		slog.Duration("re_replicate_after", s.ReReplicateAfter),
		slog.Int("default_replication_factor", s.DefaultReplicationFactor),
		slog.Int("default_min_insync_replicas", s.DefaultMinInsyncReplicas),
		slog.String("rack", s.Rack),
		slog.String("rack_file", s.RackFile),
		slog.Int("fanout_max_batch_records", s.FanoutMaxBatchRecords),
		slog.Int("fanout_max_batch_bytes", s.FanoutMaxBatchBytes),
		slog.Int("max_moves_in_flight", s.MaxMovesInFlight),
		slog.Int("min_voters", s.MinVoters),
		slog.Int64("max_inflight_request_bytes", s.MaxInflightRequestBytes),
		slog.Int64("max_inflight_answer_bytes", s.MaxInflightAnswerBytes),
		slog.String("config_file", s.ConfigFile),
	)
}
