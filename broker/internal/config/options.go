package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// kind is how an option's text is parsed.
type kind int

const (
	kString kind = iota
	kBool
	kInt
	kInt64
	kDuration
	kList // comma-separated
)

// option is one setting: a flag, its NARAD_* env name (plus aliases) and a config-file key.
type option struct {
	name    string
	kind    kind
	def     string // registered default; "" when Load computes it (dev-dependent, host name)
	help    string
	aliases []string // extra env names honoured after the canonical one
	noFile  bool     // may not come from the config file
}

// Option names (flags and config-file keys).
const (
	optDev                = "dev"
	optDataDir            = "data-dir"
	optHTTPAddr           = "http-addr"
	optClusterAddr        = "cluster-addr"
	optAdvertiseAddr      = "advertise-addr"
	optNodeID             = "node-id"
	optJoin               = "join"
	optBootstrap          = "bootstrap"
	optConfig             = "config"
	optLogLevel           = "log-level"
	optLogFormat          = "log-format"
	optPprofAddr          = "pprof-addr"
	optSecurityEnabled    = "security-enabled"
	optAdminUser          = "admin-user"
	optAdminPassword      = "admin-password"
	optAdminPasswordFile  = "admin-password-file"
	optClusterSecret      = "cluster-secret"
	optClusterSecretFile  = "cluster-secret-file"
	optStorageCodec       = "storage-codec"
	optStorageCompression = "storage-compression-level"
	optMaxConsumeWait     = "max-consume-wait"
	optDefaultPartitions  = "topic-default-partitions"
	optMaxPartitions      = "topic-max-partitions"
	optDefaultRetentionMs = "topic-default-retention-ms"
	optIdleLogEviction    = "idle-log-eviction"
	optShutdownGrace      = "shutdown-grace"
	optHTTPReadTimeout    = "http-read-timeout"
	optHTTPWriteTimeout   = "http-write-timeout"
	optHTTPIdleTimeout    = "http-idle-timeout"
	optHTTPFastPath       = "http-fast-path"
	optTLSCert            = "tls-cert"
	optTLSKey             = "tls-key"
	optClusterTLSCA       = "cluster-tls-ca"
	optInitialMembers     = "initial-members"
	optHeartbeatInterval  = "heartbeat-interval"
	optHeartbeatTimeout   = "heartbeat-timeout"
	optForcePromoteAfter  = "move-force-promote-after"
	optDeadTargetAbort    = "move-dead-target-abort-after"
	optRemoteAllowedHosts = "remote-allowed-hosts"
	optFanoutMaxRecords   = "fanout-max-batch-records"
	optFanoutMaxBytes     = "fanout-max-batch-bytes"
	optMaxMovesInFlight   = "max-moves-in-flight"
	optMinVoters          = "min-voters"
	optReplicaFailover    = "replica-failover-after"
	optReReplicate        = "re-replicate-after"
	optDefaultReplication = "default-replication-factor"
	optRack               = "rack"
	optRackFile           = "rack-file"
	optDefaultMinInsync   = "default-min-insync-replicas"

	optMaxConnections             = "max-connections"
	optMaxConnectionsPerIP        = "max-connections-per-ip"
	optClusterMaxConnections      = "cluster-max-connections"
	optClusterMaxConnectionsPerIP = "cluster-max-connections-per-ip"
)

// Connection caps of the two ports (docs/operating.md, "Connection limits"). The per-IP caps
// leave room for load generators and tests on one loopback address; the cluster port sees a
// handful of connections per peer node.
const (
	DefaultMaxConnections             = 8192
	DefaultMaxConnectionsPerIP        = 1024
	DefaultClusterMaxConnections      = 1024
	DefaultClusterMaxConnectionsPerIP = 256
	optTrustedProxies                 = "trusted-proxies"
	optMaxInflightBytes               = "max-inflight-request-bytes"
	optMaxInflightAnswerBytes         = "max-inflight-answer-bytes"
)

// Defaults that do not depend on other settings.
const (
	DefaultDataDir          = "data"
	DefaultHTTPAddr         = ":7942"
	DevHTTPAddr             = "127.0.0.1:7942"
	DefaultClusterAddr      = ":7943"
	DevClusterAddr          = "127.0.0.1:7943"
	DefaultAdminUser        = "admin"
	DefaultMaxConsumeWait   = 10 * time.Second
	DefaultIdleLogEviction  = 30 * time.Minute
	DefaultShutdownGrace    = 10 * time.Second
	DefaultHTTPReadTimeout  = 10 * time.Second
	DefaultHTTPWriteTimeout = 30 * time.Second
	DefaultHTTPIdleTimeout  = 60 * time.Second

	// DefaultHeartbeatInterval is how often a node upserts its member record (docs/internals/metastore.md §11).
	DefaultHeartbeatInterval = 5 * time.Second
	// DefaultHeartbeatTimeout is the heartbeat age past which the controller marks a member
	// dead (docs/internals/metastore.md §11); it must exceed the interval.
	DefaultHeartbeatTimeout = 30 * time.Second
	// DefaultForcePromoteAfter is how long a move's source must be dead (by the leader's stamp
	// and the destination's own clock) before the destination promotes a complete copy
	// (docs/internals/moves.md §8).
	DefaultForcePromoteAfter = 2 * time.Minute
	// DefaultDeadTargetAbortAfter is how long a move's destination may be dead, on the leader's
	// clock, before the controller clears the move (docs/internals/moves.md §10).
	DefaultDeadTargetAbortAfter = 2 * time.Minute
	// DefaultReplicaFailoverAfter is how long a replicated partition's leader may miss its
	// heartbeats before the controller elects another (docs/internals/replication.md §7); the
	// member's dead verdict (heartbeat-timeout) stays for everything else.
	DefaultReplicaFailoverAfter = 10 * time.Second
	// DefaultReReplicateAfter is how long a member may be dead, on the leader's clock, before
	// the controller rebuilds its replicas of replicated partitions elsewhere
	// (docs/internals/replication.md §9); 0 = never.
	DefaultReReplicateAfter = 10 * time.Minute

	// Tunables of the seeds (docs/operating.md, Tunables): a fan-out slab's caps
	// (fanout.max_batch_records / _bytes), the controller's budget of partition moves in flight
	// (MaxInFlightMoves) and the voters a decommission must leave (MinVoters).
	DefaultFanoutMaxBatchRecords = 4096
	DefaultFanoutMaxBatchBytes   = 4 << 20
	DefaultMaxMovesInFlight      = 8
	DefaultMinVoters             = 3
	// DefaultMaxInflightRequestBytes is the node's budget of produce body bytes held at once
	// (Kafka's queued.max.request.bytes): 256 MiB, 32 full batch bodies.
	DefaultMaxInflightRequestBytes = int64(256 << 20)
	// MinInflightRequestBytes is the smallest budget: one full batch produce body (8 MiB)
	// must fit, or it would be refused forever.
	MinInflightRequestBytes = int64(8 << 20)
	// DefaultMaxInflightAnswerBytes is the node's budget of message bytes held in consume and
	// replay answers at once: 256 MiB, 32 full answers.
	DefaultMaxInflightAnswerBytes = int64(256 << 20)
	// MinInflightAnswerBytes is the smallest answer budget: one full answer (8 MiB).
	MinInflightAnswerBytes = int64(8 << 20)
)

// options lists every setting in the order errors are reported.
var options = []option{
	{name: optDev, kind: kBool, def: "false", help: "single-node development mode: loopback addresses, security off, text logs"},
	{name: optConfig, kind: kString, noFile: true, help: "YAML or JSON file whose keys are these flag names"},
	{name: optDataDir, kind: kString, def: DefaultDataDir, help: "data directory"},
	{name: optHTTPAddr, kind: kString, help: "client API listen host:port (default " + DevHTTPAddr + " with --dev, " + DefaultHTTPAddr + " otherwise)"},
	{name: optClusterAddr, kind: kString, help: "node RPC and Raft listen host:port (default " + DefaultClusterAddr + "; " + DevClusterAddr + " with --dev)"},
	{name: optAdvertiseAddr, kind: kString, help: "cluster host:port other nodes dial (default: derived from cluster-addr)"},
	{name: optNodeID, kind: kString, help: "node ID (default: the host name)"},
	{name: optJoin, kind: kList, aliases: []string{"NARAD_CLUSTER_PEERS"}, help: "comma-separated host:port of cluster peers to join"},
	{name: optBootstrap, kind: kBool, def: "false", help: "bootstrap a new cluster when the data directory is empty"},
	{name: optLogLevel, kind: kString, def: "info", help: "log level: debug, info, warn, error"},
	{name: optLogFormat, kind: kString, help: "log format: json or text (default json; text with --dev)"},
	{name: optPprofAddr, kind: kString, help: "serve net/http/pprof on this host:port (default off); needs admin credentials when security is on, a loopback address when it is off"},
	{name: optSecurityEnabled, kind: kBool, def: "true", help: "require HTTP Basic credentials and enforce grants (--dev turns it off unless set to true explicitly)"},
	{name: optAdminUser, kind: kString, def: DefaultAdminUser, help: "name of the root admin seeded at first cluster start"},
	{name: optAdminPassword, kind: kString, help: "root admin password at first start, at most 72 bytes (default: random, logged once); as a flag only with --dev (visible in ps): use the file or the environment"},
	{name: optAdminPasswordFile, kind: kString, help: "read the root admin password from this file (trailing newline trimmed)"},
	{name: optClusterSecret, kind: kString, noFile: true, help: "shared secret authenticating node-to-node calls (not accepted in the config file; as a flag only with --dev, since ps shows it: use the file or the environment)"},
	{name: optClusterSecretFile, kind: kString, help: "read the cluster secret from this file (trailing newline trimmed)"},
	{name: optStorageCodec, kind: kString, def: "none", help: "partition log compression: none or zstd"},
	{name: optStorageCompression, kind: kString, def: "fastest", help: "zstd level: fastest, default, better, best"},
	{name: optMaxConsumeWait, kind: kDuration, def: DefaultMaxConsumeWait.String(), aliases: []string{"NARAD_HTTP_MAX_CONSUME_WAIT"}, help: "long-poll ceiling of consume; below http-write-timeout, at most shutdown-grace"},
	{name: optDefaultPartitions, kind: kInt, def: "3", help: "partitions of a topic created without a count"},
	{name: optMaxPartitions, kind: kInt, def: "108", help: "largest partition count a topic may have (3-108)"},
	{name: optDefaultRetentionMs, kind: kInt64, def: "604800000", aliases: []string{"NARAD_TOPIC_DEFAULT_RETENTION_AGE_MS"}, help: "retention of a topic created without one, ms (0 = forever, else 3600000 to 315360000000)"},
	{name: optIdleLogEviction, kind: kDuration, def: DefaultIdleLogEviction.String(), help: "close partition logs untouched this long (0 disables)"},
	{name: optShutdownGrace, kind: kDuration, def: DefaultShutdownGrace.String(), help: "time graceful shutdown waits for in-flight requests"},
	{name: optHTTPReadTimeout, kind: kDuration, def: DefaultHTTPReadTimeout.String(), help: "HTTP server read timeout"},
	{name: optHTTPWriteTimeout, kind: kDuration, def: DefaultHTTPWriteTimeout.String(), help: "HTTP server write timeout; must exceed max-consume-wait"},
	{name: optHTTPIdleTimeout, kind: kDuration, def: DefaultHTTPIdleTimeout.String(), help: "HTTP server keep-alive idle timeout"},
	{name: optHTTPFastPath, kind: kBool, def: "true", help: "serve plain-HTTP produce, consume and ack requests of the common shape on a leaner HTTP/1.1 path (false: net/http serves every request)"},
	{name: optTLSCert, kind: kString, aliases: []string{"NARAD_CLUSTER_TLS_CERT_FILE"}, help: "PEM certificate file; with tls-key the HTTP API serves HTTPS and the cluster port uses TLS"},
	{name: optTLSKey, kind: kString, aliases: []string{"NARAD_CLUSTER_TLS_KEY_FILE"}, help: "PEM private key file of tls-cert"},
	{name: optClusterTLSCA, kind: kString, aliases: []string{"NARAD_CLUSTER_TLS_CA_FILE"}, help: "PEM file of the CA that signs every node certificate; turns on mutual TLS between nodes (needs tls-cert and tls-key)"},
	{name: optInitialMembers, kind: kList, aliases: []string{"NARAD_CLUSTER_INITIAL_MEMBERS"}, help: "comma-separated node IDs that bootstrap the cluster on an empty disk (empty: every node may bootstrap)"},
	{name: optHeartbeatInterval, kind: kDuration, def: DefaultHeartbeatInterval.String(), help: "member heartbeat period; change only for tests and unusual networks"},
	{name: optForcePromoteAfter, kind: kDuration, def: DefaultForcePromoteAfter.String(), help: "how long a move's source must be dead before the destination promotes its complete copy; change only for tests"},
	{name: optDeadTargetAbort, kind: kDuration, def: DefaultDeadTargetAbortAfter.String(), help: "how long a move's destination may be dead before the controller clears the move; change only for tests"},
	{name: optRemoteAllowedHosts, kind: kList, help: "comma-separated hosts, host:port or CIDRs that remote fan-out children may target (empty: any host; set it in production)"},
	{name: optTrustedProxies, kind: kList, help: "comma-separated IPs or CIDR prefixes of reverse proxies whose X-Forwarded-For names the client address the failed-login throttle keys on (default none: the TCP peer is the client)"},
	{name: optMaxInflightAnswerBytes, kind: kInt64, def: strconv.FormatInt(DefaultMaxInflightAnswerBytes, 10), help: "budget of message bytes held in consume and replay answers at once; a consume that finds it spent is answered 503 with Retry-After (at least 8388608)"},
	{name: optMaxInflightBytes, kind: kInt64, def: strconv.FormatInt(DefaultMaxInflightRequestBytes, 10), help: "budget of produce request body bytes held in memory at once; a produce over it is answered 503 with Retry-After (at least 8388608)"},
	{name: optHeartbeatTimeout, kind: kDuration, def: DefaultHeartbeatTimeout.String(), help: "heartbeat age after which a member is marked dead, above heartbeat-interval; change only for tests and unusual networks"},
	{name: optFanoutMaxRecords, kind: kInt, def: strconv.Itoa(DefaultFanoutMaxBatchRecords), help: "most parent records one fan-out slab carries to its children (1-65536)"},
	{name: optFanoutMaxBytes, kind: kInt, def: strconv.Itoa(DefaultFanoutMaxBatchBytes), help: "most key+payload bytes one fan-out slab carries (1024-8388608; a larger record still goes alone)"},
	{name: optMaxMovesInFlight, kind: kInt, def: strconv.Itoa(DefaultMaxMovesInFlight), help: "partition moves the leader runs at once (1-256); set the same on every node"},
	{name: optMinVoters, kind: kInt, def: strconv.Itoa(DefaultMinVoters), help: "Raft voters the leader keeps and a decommission must leave (odd, 1-9); set the same on every node"},
	{name: optDefaultReplication, kind: kInt, def: "1", help: "replication factor of a topic created without one (1-5; a replicated topic keeps each partition on that many nodes, docs/replication.md)"},
	{name: optRack, kind: kString, help: "this node's failure domain (rack or zone; 1-64 characters of A-Z a-z 0-9 . _ -): replicas of a partition go to distinct racks when there are enough (default: none, a rack of its own)"},
	{name: optRackFile, kind: kString, help: "read --rack from this file at start (surrounding white space trimmed; an empty file means no rack, a missing one is an error); not together with --rack"},
	{name: optDefaultMinInsync, kind: kInt, def: "0", help: "min_insync_replicas of a replicated topic created without one (1-5, capped at the topic's replication factor; 0 = min(2, R)); set the same on every node"},
	{name: optReReplicate, kind: kDuration, def: DefaultReReplicateAfter.String(), help: "time a member stays dead (after heartbeat-timeout) before the controller rebuilds its copies of replicated partitions on other nodes (0 = never, else at most 168h); set the same on every node"},
	{name: optReplicaFailover, kind: kDuration, def: DefaultReplicaFailoverAfter.String(), help: "heartbeat silence after which the leader of a replicated partition (replication_factor >= 2) is replaced by an in-sync replica (1s-5m, above heartbeat-interval); set the same on every node"},
	{name: optMaxConnections, kind: kInt, def: strconv.Itoa(DefaultMaxConnections), help: "connections the HTTP port keeps open at once; more are closed at accept"},
	{name: optMaxConnectionsPerIP, kind: kInt, def: strconv.Itoa(DefaultMaxConnectionsPerIP), help: "connections the HTTP port keeps open at once from one client IP (at most max-connections)"},
	{name: optClusterMaxConnections, kind: kInt, def: strconv.Itoa(DefaultClusterMaxConnections), help: "connections the cluster port keeps open at once, authenticated or not"},
	{name: optClusterMaxConnectionsPerIP, kind: kInt, def: strconv.Itoa(DefaultClusterMaxConnectionsPerIP), help: "connections the cluster port keeps open at once from one IP (at most cluster-max-connections)"},
}

var optionsByName = func() map[string]*option {
	m := make(map[string]*option, len(options))
	for i := range options {
		m[options[i].name] = &options[i]
	}
	return m
}()

// EnvName returns the environment variable of a flag: NARAD_ + upper case, '-' → '_'
// (max-consume-wait → NARAD_MAX_CONSUME_WAIT).
func EnvName(flag string) string {
	return "NARAD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Register adds every `narad serve` flag to fs with its default and help text. Defaults that
// depend on --dev or on the host are applied by Load and shown in the help text.
func Register(fs *pflag.FlagSet) {
	for _, o := range options {
		help := o.help + " [" + EnvName(o.name) + "]"
		switch o.kind {
		case kBool:
			fs.Bool(o.name, o.def == "true", help)
		case kInt:
			n, _ := strconv.Atoi(o.def)
			fs.Int(o.name, n, help)
		case kInt64:
			n, _ := strconv.ParseInt(o.def, 10, 64)
			fs.Int64(o.name, n, help)
		case kDuration:
			d, _ := time.ParseDuration(o.def)
			fs.Duration(o.name, d, help)
		case kList:
			fs.StringSlice(o.name, nil, help)
		default:
			fs.String(o.name, o.def, help)
		}
	}
}
