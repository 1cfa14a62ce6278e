package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestMain(m *testing.M) {
	hostname = func() (string, error) { return "test-host", nil }
	os.Exit(m.Run())
}

// load registers the serve flags, parses args and loads with env as the environment.
func load(t *testing.T, args []string, env map[string]string) (Serve, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return Load(fs, func(k string) string { return env[k] })
}

func mustLoad(t *testing.T, args []string, env map[string]string) Serve {
	t.Helper()
	s, err := load(t, args, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsApplyWhenNothingIsSet(t *testing.T) {
	got := mustLoad(t, nil, nil)
	want := Serve{
		DataDir: "data", HTTPAddr: ":7942", ClusterAddr: ":7943", NodeID: "test-host",
		LogLevel: "info", LogFormat: "json", SecurityEnabled: true, AdminUser: "admin",
		StorageCodec: "none", StorageCompressionLevel: "fastest",
		MaxConsumeWait: 10 * time.Second, TopicDefaultPartitions: 3, TopicMaxPartitions: 108,
		TopicDefaultRetentionMs: 604_800_000, IdleLogEviction: 30 * time.Minute,
		ShutdownGrace: 10 * time.Second, HTTPReadTimeout: 10 * time.Second,
		HTTPWriteTimeout: 30 * time.Second, HTTPIdleTimeout: 60 * time.Second, HTTPFastPath: true,
		HeartbeatInterval: 5 * time.Second, HeartbeatTimeout: 30 * time.Second,
		ForcePromoteAfter: 2 * time.Minute, DeadTargetAbortAfter: 2 * time.Minute, ReplicaFailoverAfter: 10 * time.Second, ReReplicateAfter: 10 * time.Minute, DefaultReplicationFactor: 1,
		FanoutMaxBatchRecords: 4096, FanoutMaxBatchBytes: 4 << 20, MaxMovesInFlight: 8, MinVoters: 3,
		MaxConnections: 8192, MaxConnectionsPerIP: 1024, ClusterMaxConnections: 1024, ClusterMaxConnectionsPerIP: 256,
		MaxInflightRequestBytes: 256 << 20, MaxInflightAnswerBytes: 256 << 20,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestDevModeChangesDefaultsButNotExplicitSettings(t *testing.T) {
	cases := []struct {
		name         string
		args         []string
		env          map[string]string
		wantSecurity bool
		wantHTTP     string
		wantFormat   string
	}{
		{"dev flag", []string{"--dev"}, nil, false, "127.0.0.1:7942", "text"},
		{"dev from env", nil, map[string]string{"NARAD_DEV": "true"}, false, "127.0.0.1:7942", "text"},
		{"dev with security flag true", []string{"--dev", "--security-enabled=true"}, nil, true, "127.0.0.1:7942", "text"},
		{"dev with security env true", []string{"--dev"}, map[string]string{"NARAD_SECURITY_ENABLED": "true"}, true, "127.0.0.1:7942", "text"},
		{"dev with explicit addr and format", []string{"--dev", "--http-addr", ":9000", "--log-format", "json"}, nil, false, ":9000", "json"},
		{"no dev, security off explicitly", []string{"--security-enabled=false"}, nil, false, ":7942", "json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustLoad(t, c.args, c.env)
			if s.SecurityEnabled != c.wantSecurity || s.HTTPAddr != c.wantHTTP || s.LogFormat != c.wantFormat {
				t.Fatalf("security=%v http=%s format=%s; want %v %s %s", s.SecurityEnabled, s.HTTPAddr, s.LogFormat, c.wantSecurity, c.wantHTTP, c.wantFormat)
			}
			if s.Dev && s.ClusterAddr != DevClusterAddr {
				t.Fatalf("dev cluster-addr = %s, want loopback", s.ClusterAddr)
			}
		})
	}
}

func TestPrecedenceIsFlagThenEnvThenFileThenDefault(t *testing.T) {
	file := writeFile(t, "narad.yaml", "max-consume-wait: 3s\ndata-dir: /from/file\njoin: [f1:1, f2:2]\ncluster-secret-file: "+writeFile(t, "s", "x\n")+"\n")
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		wantWait time.Duration
		wantDir  string
		wantJoin []string
	}{
		{"default only", nil, nil, 10 * time.Second, "data", nil},
		{"file beats default", []string{"--config", file}, nil, 3 * time.Second, "/from/file", []string{"f1:1", "f2:2"}},
		{"env beats file", []string{"--config", file}, map[string]string{"NARAD_MAX_CONSUME_WAIT": "4s", "NARAD_DATA_DIR": "/from/env", "NARAD_JOIN": "e1:1"}, 4 * time.Second, "/from/env", []string{"e1:1"}},
		{"flag beats env", []string{"--config", file, "--max-consume-wait=5s", "--data-dir=/from/flag", "--join=a:1,b:2", "--join=c:3"}, map[string]string{"NARAD_MAX_CONSUME_WAIT": "4s", "NARAD_DATA_DIR": "/from/env"}, 5 * time.Second, "/from/flag", []string{"a:1", "b:2", "c:3"}},
		{"config path from env", nil, map[string]string{"NARAD_CONFIG": file}, 3 * time.Second, "/from/file", []string{"f1:1", "f2:2"}},
		{"empty env counts as unset", []string{"--config", file}, map[string]string{"NARAD_DATA_DIR": ""}, 3 * time.Second, "/from/file", []string{"f1:1", "f2:2"}},
		{"flag equal to its default still wins", []string{"--config", file, "--max-consume-wait=10s"}, nil, 10 * time.Second, "/from/file", []string{"f1:1", "f2:2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustLoad(t, c.args, c.env)
			if s.MaxConsumeWait != c.wantWait || s.DataDir != c.wantDir || !reflect.DeepEqual(s.Join, c.wantJoin) {
				t.Fatalf("wait=%s dir=%s join=%v; want %s %s %v", s.MaxConsumeWait, s.DataDir, s.Join, c.wantWait, c.wantDir, c.wantJoin)
			}
		})
	}
}

func TestEnvNamesAreUpperSnakeWithAliases(t *testing.T) {
	for flag, env := range map[string]string{
		"data-dir":                   "NARAD_DATA_DIR",
		"max-consume-wait":           "NARAD_MAX_CONSUME_WAIT",
		"storage-compression-level":  "NARAD_STORAGE_COMPRESSION_LEVEL",
		"topic-default-retention-ms": "NARAD_TOPIC_DEFAULT_RETENTION_MS",
		"dev":                        "NARAD_DEV",
	} {
		if got := EnvName(flag); got != env {
			t.Errorf("EnvName(%s) = %s, want %s", flag, got, env)
		}
	}
	s := mustLoad(t, nil, map[string]string{
		"NARAD_ADMIN_PASSWORD":                 "pw",
		"NARAD_SECURITY_ENABLED":               "false",
		"NARAD_HTTP_MAX_CONSUME_WAIT":          "7s",
		"NARAD_TOPIC_DEFAULT_PARTITIONS":       "5",
		"NARAD_TOPIC_MAX_PARTITIONS":           "50",
		"NARAD_TOPIC_DEFAULT_RETENTION_AGE_MS": "0",
		"NARAD_DATA_DIR":                       "/d",
		"NARAD_HTTP_ADDR":                      "127.0.0.1:1",
		"NARAD_CLUSTER_PEERS":                  "p1:7943, p2:7943",
		"NARAD_CLUSTER_SECRET":                 "s",
		"NARAD_STORAGE_CODEC":                  "zstd",
		"NARAD_IDLE_LOG_EVICTION":              "0",
	})
	want := []any{"pw", false, 7 * time.Second, 5, 50, int64(0), "/d", "127.0.0.1:1", []string{"p1:7943", "p2:7943"}, "s", "zstd", time.Duration(0)}
	got := []any{s.AdminPassword, s.SecurityEnabled, s.MaxConsumeWait, s.TopicDefaultPartitions, s.TopicMaxPartitions, s.TopicDefaultRetentionMs, s.DataDir, s.HTTPAddr, s.Join, s.ClusterSecret, s.StorageCodec, s.IdleLogEviction}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("env mapping:\n got %v\nwant %v", got, want)
	}
	s = mustLoad(t, nil, map[string]string{"NARAD_FANOUT_MAX_BATCH_RECORDS": "16", "NARAD_FANOUT_MAX_BATCH_BYTES": "65536",
		"NARAD_MAX_MOVES_IN_FLIGHT": "2", "NARAD_MIN_VOTERS": "5", "NARAD_REPLICA_FAILOVER_AFTER": "1m"})
	if s.FanoutMaxBatchRecords != 16 || s.FanoutMaxBatchBytes != 65536 || s.MaxMovesInFlight != 2 || s.MinVoters != 5 ||
		s.ReplicaFailoverAfter != time.Minute {
		t.Fatalf("tunables from env: %+v", s)
	}
	// The canonical name beats its alias.
	s = mustLoad(t, nil, map[string]string{"NARAD_MAX_CONSUME_WAIT": "2s", "NARAD_HTTP_MAX_CONSUME_WAIT": "7s"})
	if s.MaxConsumeWait != 2*time.Second {
		t.Fatalf("canonical env lost to alias: %s", s.MaxConsumeWait)
	}
}

func TestYAMLAndJSONFilesGiveTheSameConfig(t *testing.T) {
	yamlDoc := `# comment
dev: false
data-dir: /var/lib/narad
http-addr: :8080
node-id: "0123"
join:
  - n1:7943
  - n2:7943
log-level: debug
security-enabled: true
admin-password-file: PWFILE
cluster-secret-file: SECRETFILE
storage-codec: zstd
storage-compression-level: better
max-consume-wait: 5s
topic-default-partitions: 6
topic-max-partitions: 60
topic-default-retention-ms: 3600000
idle-log-eviction: 0
shutdown-grace: 20s
http-write-timeout: 1m
fanout-max-batch-records: 100
min-voters: 5
`
	jsonDoc := `{
	"dev": false, "data-dir": "/var/lib/narad", "http-addr": ":8080", "node-id": "0123",
	"join": ["n1:7943", "n2:7943"], "log-level": "debug", "security-enabled": true,
	"admin-password-file": "PWFILE", "cluster-secret-file": "SECRETFILE",
	"storage-codec": "zstd", "storage-compression-level": "better", "max-consume-wait": "5s",
	"topic-default-partitions": 6, "topic-max-partitions": 60, "topic-default-retention-ms": 3600000,
	"idle-log-eviction": 0, "shutdown-grace": "20s", "http-write-timeout": "1m",
	"fanout-max-batch-records": 100, "min-voters": 5
}`
	pw := writeFile(t, "pw", "hunter2\n")
	secret := writeFile(t, "secret", "cluster-secret-value\r\n")
	fix := func(s string) string {
		return strings.NewReplacer("PWFILE", pw, "SECRETFILE", secret).Replace(s)
	}
	y := mustLoad(t, []string{"--config", writeFile(t, "c.yaml", fix(yamlDoc))}, nil)
	j := mustLoad(t, []string{"--config", writeFile(t, "c.json", fix(jsonDoc))}, nil)
	y.ConfigFile, j.ConfigFile = "", ""
	if !reflect.DeepEqual(y, j) {
		t.Fatalf("YAML and JSON differ:\nyaml %+v\njson %+v", y, j)
	}
	if y.NodeID != "0123" || y.AdminPassword != "hunter2" || y.ClusterSecret != "cluster-secret-value" ||
		y.TopicDefaultRetentionMs != 3_600_000 || y.HTTPWriteTimeout != time.Minute || len(y.Join) != 2 ||
		y.FanoutMaxBatchRecords != 100 || y.MinVoters != 5 {
		t.Fatalf("file values not applied: %+v", y)
	}
	// JSON content is recognised without the .json extension, tabs and all.
	k := mustLoad(t, []string{"--config", writeFile(t, "c.conf", fix(jsonDoc))}, nil)
	k.ConfigFile = ""
	if !reflect.DeepEqual(k, j) {
		t.Fatal("JSON content in a .conf file decoded differently")
	}
}

func TestEmptyConfigFileIsAllDefaults(t *testing.T) {
	for _, content := range []string{"", "# nothing\n", "{}"} {
		s := mustLoad(t, []string{"--config", writeFile(t, "c", content)}, nil)
		if s.DataDir != "data" || s.MaxConsumeWait != 10*time.Second {
			t.Fatalf("%q: defaults not applied: %+v", content, s)
		}
	}
}

func TestConfigFileKeyErrorsNameTheKey(t *testing.T) {
	cases := []struct {
		name, file, content, want string
	}{
		{"unknown yaml key", "c.yaml", "http-adr: :1\n", "config: http-adr: unknown key"},
		{"unknown json key", "c.json", `{"bogus": 1}`, "config: bogus: unknown key"},
		{"snake case hint", "c.yaml", "http_addr: :1\n", "did you mean http-addr?"},
		{"segment bytes kebab", "c.yaml", "segment-bytes: 1048576\n", "config: segment-bytes: is an engine internal"},
		{"segment bytes snake", "c.json", `{"segment_bytes": 1}`, "config: segment_bytes: is an engine internal"},
		{"cluster secret in plain text", "c.yaml", "cluster-secret: abc\n", "config: cluster-secret: must not be stored in the config file"},
		{"config inside config", "c.yaml", "config: other.yaml\n", "config: config: a config file cannot name another"},
		{"duplicate yaml key", "c.yaml", "dev: true\ndev: false\n", "config: dev: duplicate key"},
		{"duplicate json key", "c.json", `{"dev": true, "dev": false}`, "config: dev: duplicate key"},
		{"nested value", "c.yaml", "log-level:\n  a: b\n", "config: log-level: must be a scalar"},
		{"null value", "c.json", `{"node-id": null}`, "config: node-id: has no value"},
		{"not a mapping", "c.yaml", "- a\n- b\n", "config: config: "},
		{"two documents", "c.yaml", "dev: true\n---\ndev: false\n", "more than one YAML document"},
		{"broken json", "c.json", `{"dev": tru}`, "config: config: "},
		{"key with newline is quoted", "c.json", `{"a\nb": 1}`, `config: "a\nb": unknown key`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, []string{"--config", writeFile(t, c.file, c.content)}, nil)
			var fe *FieldError
			if err == nil || !errors.As(err, &fe) {
				t.Fatalf("Load = %v, want a FieldError", err)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q should contain %q on one line", err, c.want)
			}
		})
	}
	if _, err := load(t, []string{"--config", "/nonexistent/narad.yaml"}, nil); err == nil || !strings.HasPrefix(err.Error(), "config: config: ") {
		t.Fatalf("missing config file: %v", err)
	}
}

func TestEachValidationErrorNamesItsField(t *testing.T) {
	longPw := strings.Repeat("p", 73)
	cases := []struct {
		args  []string
		env   map[string]string
		field string
		want  string // extra substring
	}{
		{[]string{"--data-dir="}, nil, "data-dir", "empty"},
		{[]string{"--http-addr=7942"}, nil, "http-addr", "host:port"},
		{[]string{"--http-addr=:http"}, nil, "http-addr", "numeric port"},
		{[]string{"--cluster-addr=:99999"}, nil, "cluster-addr", "numeric port"},
		{[]string{"--cluster-addr=:7942"}, nil, "cluster-addr", "collides with http-addr"},
		{[]string{"--advertise-addr=:7943"}, nil, "advertise-addr", "needs a host"},
		{[]string{"--pprof-addr=localhost"}, nil, "pprof-addr", "host:port"},
		{[]string{"--join=peer"}, map[string]string{"NARAD_CLUSTER_SECRET": "s"}, "join", "host:port"},
		{[]string{"--join=peer:7943"}, nil, "cluster-secret", "required when join is set"},
		{[]string{"--node-id=bad/id"}, nil, "node-id", "characters"},
		{[]string{"--log-level=verbose"}, nil, "log-level", "not one of"},
		{[]string{"--log-format=xml"}, nil, "log-format", "not one of"},
		{nil, map[string]string{"NARAD_DEV": "maybe"}, "dev", "invalid boolean \"maybe\" (from env NARAD_DEV)"},
		{nil, map[string]string{"NARAD_SECURITY_ENABLED": "yes"}, "security-enabled", "invalid boolean"},
		{[]string{"--admin-user=no spaces"}, nil, "admin-user", "characters"},
		{nil, map[string]string{"NARAD_ADMIN_PASSWORD": longPw}, "admin-password", "longer than 72 bytes"},
		{[]string{"--dev", "--admin-password=" + longPw}, nil, "admin-password", "longer than 72 bytes"},
		{[]string{"--admin-password=" + longPw}, nil, "admin-password", "visible to every local user"},
		{[]string{"--admin-password=a"}, nil, "admin-password", "use --admin-password-file or NARAD_ADMIN_PASSWORD"},
		{[]string{"--cluster-secret=a"}, nil, "cluster-secret", "use --cluster-secret-file or NARAD_CLUSTER_SECRET"},
		{[]string{"--pprof-addr=:7942"}, nil, "pprof-addr", "collides with http-addr"},
		{[]string{"--pprof-addr=0.0.0.0:7943"}, nil, "pprof-addr", "collides with cluster-addr"},
		{[]string{"--security-enabled=false", "--pprof-addr=:6060"}, nil, "pprof-addr", "loopback"},
		{[]string{"--dev", "--pprof-addr=10.0.0.1:6060"}, nil, "pprof-addr", "loopback"},
		{[]string{"--trusted-proxies=10.0.0.0/8,proxy.local"}, nil, "trusted-proxies", "neither an IP address nor a CIDR prefix"},
		{[]string{"--admin-password=a"}, map[string]string{"NARAD_ADMIN_PASSWORD_FILE": "/x"}, "admin-password", "not both"},
		{[]string{"--admin-password-file=/nonexistent/pw"}, nil, "admin-password-file", "no such file"},
		{[]string{"--cluster-secret=a", "--cluster-secret-file=/x"}, nil, "cluster-secret", "not both"},
		{[]string{"--storage-codec=gzip"}, nil, "storage-codec", "not one of"},
		{[]string{"--storage-compression-level=max"}, nil, "storage-compression-level", "not one of"},
		{nil, map[string]string{"NARAD_MAX_CONSUME_WAIT": "10"}, "max-consume-wait", "invalid duration \"10\""},
		{[]string{"--max-consume-wait=-1s"}, nil, "max-consume-wait", "negative"},
		{[]string{"--max-consume-wait=30s", "--shutdown-grace=40s"}, nil, "max-consume-wait", "must be below http-write-timeout (30s)"},
		{[]string{"--max-consume-wait=15s"}, nil, "max-consume-wait", "must not exceed shutdown-grace (10s)"},
		{[]string{"--topic-max-partitions=109"}, nil, "topic-max-partitions", "outside 3…108"},
		{[]string{"--topic-max-partitions=2"}, nil, "topic-max-partitions", "outside"},
		{[]string{"--topic-default-partitions=2"}, nil, "topic-default-partitions", "outside"},
		{[]string{"--topic-max-partitions=10", "--topic-default-partitions=11"}, nil, "topic-default-partitions", "topic-max-partitions (10)"},
		{nil, map[string]string{"NARAD_TOPIC_DEFAULT_PARTITIONS": "three"}, "topic-default-partitions", "invalid integer"},
		{[]string{"--topic-default-retention-ms=3599999"}, nil, "topic-default-retention-ms", "at least 3600000"},
		{[]string{"--topic-default-retention-ms=-1"}, nil, "topic-default-retention-ms", "at least"},
		{[]string{"--idle-log-eviction=-1m"}, nil, "idle-log-eviction", "negative"},
		{[]string{"--shutdown-grace=0s"}, nil, "shutdown-grace", "positive"},
		{[]string{"--http-read-timeout=0s"}, nil, "http-read-timeout", "positive"},
		{[]string{"--http-write-timeout=0s"}, nil, "http-write-timeout", "positive"},
		{[]string{"--http-idle-timeout=-5s"}, nil, "http-idle-timeout", "positive"},
		{[]string{"--max-connections=0"}, nil, "max-connections", "at least 1"},
		{[]string{"--max-connections=10", "--max-connections-per-ip=11"}, nil, "max-connections-per-ip", "1…max-connections"},
		{[]string{"--cluster-max-connections-per-ip=0"}, nil, "cluster-max-connections-per-ip", "1…cluster-max-connections"},
		{[]string{"--initial-members=n0,bad/id"}, nil, "initial-members", "not a node ID"},
		{nil, map[string]string{"NARAD_CLUSTER_INITIAL_MEMBERS": "n0,n1,n0"}, "initial-members", "lists \"n0\" twice (from env NARAD_CLUSTER_INITIAL_MEMBERS)"},
		{[]string{"--heartbeat-interval=0s"}, nil, "heartbeat-interval", "positive"},
		{[]string{"--heartbeat-timeout=-1s"}, nil, "heartbeat-timeout", "positive"},
		{[]string{"--heartbeat-timeout=5s"}, nil, "heartbeat-timeout", "must exceed heartbeat-interval (5s)"},
		{[]string{"--heartbeat-interval=2s", "--heartbeat-timeout=1s"}, nil, "heartbeat-timeout", "must exceed heartbeat-interval (2s)"},
		{nil, map[string]string{"NARAD_HEARTBEAT_TIMEOUT": "30"}, "heartbeat-timeout", "invalid duration"},
		{[]string{"--fanout-max-batch-records=0"}, nil, "fanout-max-batch-records", "outside 1…65536"},
		{nil, map[string]string{"NARAD_FANOUT_MAX_BATCH_RECORDS": "65537"}, "fanout-max-batch-records", "outside 1…65536 (from env NARAD_FANOUT_MAX_BATCH_RECORDS)"},
		{[]string{"--fanout-max-batch-bytes=1023"}, nil, "fanout-max-batch-bytes", "outside 1024…8388608"},
		{[]string{"--fanout-max-batch-bytes=8388609"}, nil, "fanout-max-batch-bytes", "outside"},
		{[]string{"--max-moves-in-flight=0"}, nil, "max-moves-in-flight", "outside 1…256"},
		{[]string{"--max-moves-in-flight=257"}, nil, "max-moves-in-flight", "outside"},
		{[]string{"--min-voters=0"}, nil, "min-voters", "outside 1…9"},
		{[]string{"--min-voters=11"}, nil, "min-voters", "outside"},
		{[]string{"--min-voters=4"}, nil, "min-voters", "must be odd"},
		{[]string{"--replica-failover-after=999ms"}, nil, "replica-failover-after", "outside 1s…5m0s"},
		{nil, map[string]string{"NARAD_REPLICA_FAILOVER_AFTER": "5m1s"}, "replica-failover-after", "outside 1s…5m0s (from env NARAD_REPLICA_FAILOVER_AFTER)"},
		{[]string{"--replica-failover-after=5s"}, nil, "replica-failover-after", "must exceed heartbeat-interval (5s)"},
		{[]string{"--re-replicate-after=-1s"}, nil, "re-replicate-after", "outside 0…168h0m0s"},
		{nil, map[string]string{"NARAD_RE_REPLICATE_AFTER": "169h"}, "re-replicate-after", "outside 0…168h0m0s (from env NARAD_RE_REPLICATE_AFTER)"},
		{[]string{"--default-replication-factor=0"}, nil, "default-replication-factor", "outside 1…5"},
		{nil, map[string]string{"NARAD_DEFAULT_REPLICATION_FACTOR": "6"}, "default-replication-factor", "outside 1…5"},
		{[]string{"--rack=eu west"}, nil, "rack", "must be 1-64 characters"},
		{nil, map[string]string{"NARAD_RACK": strings.Repeat("r", 65)}, "rack", "(from env NARAD_RACK)"},
		{[]string{"--default-min-insync-replicas=-1"}, nil, "default-min-insync-replicas", "outside 0…5"},
		{nil, map[string]string{"NARAD_DEFAULT_MIN_INSYNC_REPLICAS": "6"}, "default-min-insync-replicas", "outside 0…5 (from env NARAD_DEFAULT_MIN_INSYNC_REPLICAS)"},
		{[]string{"--rack-file=/nonexistent/narad-rack"}, nil, "rack-file", "no such file"},
		{[]string{"--rack=r1", "--rack-file=/nonexistent/narad-rack"}, nil, "rack-file", "not both"},
		{[]string{"--max-inflight-request-bytes=8388607"}, nil, "max-inflight-request-bytes", "below 8388608"},
		{[]string{"--max-inflight-answer-bytes=8388607"}, nil, "max-inflight-answer-bytes", "below 8388608, one full consume answer"},
		{nil, map[string]string{"NARAD_MAX_INFLIGHT_ANSWER_BYTES": "1024"}, "max-inflight-answer-bytes", "(from env NARAD_MAX_INFLIGHT_ANSWER_BYTES)"},
		{[]string{"--topic-default-retention-ms=315360000001"}, nil, "topic-default-retention-ms", "at most 315360000000"},
		{nil, map[string]string{"NARAD_MAX_INFLIGHT_REQUEST_BYTES": "lots"}, "max-inflight-request-bytes", ""},
	}
	for _, c := range cases {
		t.Run(c.field+"/"+c.want, func(t *testing.T) {
			_, err := load(t, c.args, c.env)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Load = %v, want a FieldError for %s", err, c.field)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: "+c.field+": ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Fatalf("message %q: want one line starting %q containing %q", msg, "config: "+c.field+": ", c.want)
			}
			if strings.Contains(msg, longPw) {
				t.Fatal("the password was echoed in the error")
			}
		})
	}
}

func TestSecretFilesAreReadAndTrimmed(t *testing.T) {
	pw := writeFile(t, "pw", "pass word\n\n")
	s := mustLoad(t, []string{"--admin-password-file", pw}, map[string]string{"NARAD_CLUSTER_SECRET_FILE": writeFile(t, "cs", "abc\r\n")})
	if s.AdminPassword != "pass word" || s.ClusterSecret != "abc" {
		t.Fatalf("admin=%q secret=%q", s.AdminPassword, s.ClusterSecret)
	}
	if _, err := load(t, []string{"--cluster-secret-file", writeFile(t, "empty", "\n")}, nil); err == nil || !strings.HasPrefix(err.Error(), "config: cluster-secret-file: ") {
		t.Fatalf("empty secret file: %v", err)
	}
}

func TestNodeIDDefaultsToHostName(t *testing.T) {
	if s := mustLoad(t, nil, nil); s.NodeID != "test-host" {
		t.Fatalf("NodeID = %q", s.NodeID)
	}
	old := hostname
	defer func() { hostname = old }()
	hostname = func() (string, error) { return "", errors.New("no uts") }
	if _, err := load(t, nil, nil); err == nil || !strings.HasPrefix(err.Error(), "config: node-id: ") {
		t.Fatalf("hostname failure: %v", err)
	}
	if s := mustLoad(t, []string{"--node-id=n1"}, nil); s.NodeID != "n1" {
		t.Fatalf("explicit node-id lost: %q", s.NodeID)
	}
}

func TestRegisterDeclaresEveryFlagWithDefaultAndHelp(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	Register(fs)
	defaults := map[string]string{
		"data-dir": "data", "cluster-addr": "", "log-level": "info", "security-enabled": "true",
		"admin-user": "admin", "storage-codec": "none", "storage-compression-level": "fastest",
		"max-consume-wait": "10s", "topic-default-partitions": "3", "topic-max-partitions": "108",
		"topic-default-retention-ms": "604800000", "idle-log-eviction": "30m0s", "shutdown-grace": "10s",
		"http-read-timeout": "10s", "http-write-timeout": "30s", "http-idle-timeout": "1m0s",
		"dev": "false", "bootstrap": "false", "join": "[]",
		"tls-cert": "", "tls-key": "", "cluster-tls-ca": "", "initial-members": "[]",
		"heartbeat-interval": "5s", "heartbeat-timeout": "30s",
		"move-force-promote-after": "2m0s", "move-dead-target-abort-after": "2m0s", "replica-failover-after": "10s",
		"re-replicate-after":         "10m0s",
		"default-replication-factor": "1", "rack": "",
		"rack-file": "", "default-min-insync-replicas": "0",
		"remote-allowed-hosts": "[]",
		"max-connections":      "8192", "max-connections-per-ip": "1024",
		"cluster-max-connections": "1024", "cluster-max-connections-per-ip": "256",
		"max-inflight-request-bytes": "268435456", "max-inflight-answer-bytes": "268435456",
	}
	names := []string{"dev", "data-dir", "http-addr", "cluster-addr", "advertise-addr", "node-id", "join",
		"bootstrap", "config", "log-level", "log-format", "pprof-addr", "security-enabled", "admin-user",
		"admin-password", "admin-password-file", "cluster-secret", "cluster-secret-file", "storage-codec",
		"storage-compression-level", "max-consume-wait", "topic-default-partitions", "topic-max-partitions",
		"topic-default-retention-ms", "idle-log-eviction", "shutdown-grace", "http-read-timeout",
		"http-write-timeout", "http-idle-timeout", "tls-cert", "tls-key", "cluster-tls-ca",
		"initial-members", "heartbeat-interval", "heartbeat-timeout", "move-force-promote-after",
		"move-dead-target-abort-after", "replica-failover-after", "re-replicate-after", "default-replication-factor", "rack",
		"rack-file", "default-min-insync-replicas", "remote-allowed-hosts",
		"fanout-max-batch-records", "fanout-max-batch-bytes", "max-moves-in-flight", "min-voters",
		"max-connections", "max-connections-per-ip", "cluster-max-connections", "cluster-max-connections-per-ip",
		"trusted-proxies", "max-inflight-request-bytes", "max-inflight-answer-bytes", "http-fast-path"}
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			t.Errorf("flag --%s not registered", n)
			continue
		}
		if !strings.Contains(f.Usage, EnvName(n)) || len(f.Usage) < 20 {
			t.Errorf("--%s help %q lacks text or its env name", n, f.Usage)
		}
		if d, ok := defaults[n]; ok && f.DefValue != d {
			t.Errorf("--%s default %q, want %q", n, f.DefValue, d)
		}
	}
	count := 0
	fs.VisitAll(func(*pflag.Flag) { count++ })
	if count != len(names) {
		t.Errorf("%d flags registered, want %d", count, len(names))
	}
}

func TestLoadWorksWithAPartialFlagSet(t *testing.T) {
	fs := pflag.NewFlagSet("server start", pflag.ContinueOnError)
	fs.Bool("dev", false, "")
	fs.String("data-dir", "data", "")
	if err := fs.Parse([]string{"--dev", "--data-dir=/tmp/x"}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(fs, func(string) string { return "" })
	if err != nil || !s.Dev || s.DataDir != "/tmp/x" || s.SecurityEnabled {
		t.Fatalf("Load = %+v, %v", s, err)
	}
	if _, err := Load(nil, func(string) string { return "" }); err != nil {
		t.Fatalf("Load without flags: %v", err)
	}
}

func TestLogValueRedactsSecrets(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"NARAD_ADMIN_PASSWORD": "topsecret", "NARAD_CLUSTER_SECRET": "clustersecret"})
	text := s.LogValue().String()
	if strings.Contains(text, "topsecret") || strings.Contains(text, "clustersecret") || !strings.Contains(text, "<redacted>") {
		t.Fatalf("LogValue leaks or hides wrongly: %s", text)
	}
}

// --remote-allowed-hosts loads from the flag, NARAD_REMOTE_ALLOWED_HOSTS or the file, defaults
// to empty (any host), and a bad entry is a config error naming the option.
func TestRemoteAllowedHostsLoadAndValidate(t *testing.T) {
	if s := mustLoad(t, nil, nil); len(s.RemoteAllowedHosts) != 0 {
		t.Fatalf("default RemoteAllowedHosts = %v, want empty", s.RemoteAllowedHosts)
	}
	s := mustLoad(t, []string{"--remote-allowed-hosts=dr-1:7942, 10.0.0.0/8"}, nil)
	if !reflect.DeepEqual(s.RemoteAllowedHosts, []string{"dr-1:7942", "10.0.0.0/8"}) {
		t.Fatalf("RemoteAllowedHosts = %v", s.RemoteAllowedHosts)
	}
	s = mustLoad(t, nil, map[string]string{"NARAD_REMOTE_ALLOWED_HOSTS": "dr-2"})
	if !reflect.DeepEqual(s.RemoteAllowedHosts, []string{"dr-2"}) {
		t.Fatalf("RemoteAllowedHosts from env = %v", s.RemoteAllowedHosts)
	}
	_, err := load(t, []string{"--remote-allowed-hosts=10.0.0.0/99"}, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "config: remote-allowed-hosts: ") {
		t.Fatalf("bad entry: %v", err)
	}
}

func TestSecretFlagsOnlyWithDevAndWithAWarning(t *testing.T) {
	s := mustLoad(t, []string{"--dev", "--admin-password=pw", "--cluster-secret=cs"}, nil)
	if s.AdminPassword != "pw" || s.ClusterSecret != "cs" {
		t.Fatalf("dev flags not taken: admin=%q secret=%q", s.AdminPassword, s.ClusterSecret)
	}
	if len(s.Warnings) != 2 || !strings.Contains(s.Warnings[0], "--admin-password") ||
		!strings.Contains(s.Warnings[1], "--cluster-secret") || !strings.Contains(s.Warnings[1], "ps") {
		t.Fatalf("warnings = %q, want one per secret flag naming ps", s.Warnings)
	}
	for _, w := range s.Warnings {
		if strings.Contains(w, "=pw") || strings.Contains(w, "=cs") {
			t.Fatalf("a warning echoes the secret: %q", w)
		}
	}
	// The environment and files are the production paths: accepted, no warning.
	s = mustLoad(t, []string{"--admin-password-file", writeFile(t, "pw", "pw\n")},
		map[string]string{"NARAD_CLUSTER_SECRET": "cs"})
	if s.AdminPassword != "pw" || s.ClusterSecret != "cs" || len(s.Warnings) != 0 {
		t.Fatalf("env/file: admin=%q secret=%q warnings=%q", s.AdminPassword, s.ClusterSecret, s.Warnings)
	}
}

func TestPprofAndTrustedProxiesAccepted(t *testing.T) {
	s := mustLoad(t, []string{"--pprof-addr=:6060", "--trusted-proxies=10.0.0.0/8, 192.168.1.1,fd00::/8"}, nil)
	if s.PprofAddr != ":6060" || !reflect.DeepEqual(s.TrustedProxies, []string{"10.0.0.0/8", "192.168.1.1", "fd00::/8"}) {
		t.Fatalf("pprof=%q proxies=%q", s.PprofAddr, s.TrustedProxies)
	}
	if s := mustLoad(t, []string{"--dev", "--pprof-addr=127.0.0.1:6060"}, nil); s.PprofAddr != "127.0.0.1:6060" {
		t.Fatalf("loopback pprof with --dev: %q", s.PprofAddr)
	}
}

// replica-failover-after loads from the config file too and is part of the startup log line.
func TestReplicaFailoverAfterFromFileAndLogged(t *testing.T) {
	s := mustLoad(t, []string{"--config", writeFile(t, "c.yaml", "replica-failover-after: 30s\n")}, nil)
	if s.ReplicaFailoverAfter != 30*time.Second {
		t.Fatalf("ReplicaFailoverAfter = %s from the file, want 30s", s.ReplicaFailoverAfter)
	}
	if text := s.LogValue().String(); !strings.Contains(text, "replica_failover_after=30s") {
		t.Fatalf("startup log lacks replica_failover_after: %s", text)
	}
}

func TestDefaultReplicationFactorFromEnv(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"NARAD_DEFAULT_REPLICATION_FACTOR": "3"})
	if s.DefaultReplicationFactor != 3 {
		t.Fatalf("DefaultReplicationFactor = %d, want 3", s.DefaultReplicationFactor)
	}
}

// --rack comes from the env (or the flag), is logged, and defaults to none.
func TestRackFromEnvAndLogged(t *testing.T) {
	if s := mustLoad(t, nil, nil); s.Rack != "" {
		t.Fatalf("Rack = %q by default, want none", s.Rack)
	}
	s := mustLoad(t, nil, map[string]string{"NARAD_RACK": "eu-west-1a"})
	if s.Rack != "eu-west-1a" {
		t.Fatalf("Rack = %q, want eu-west-1a", s.Rack)
	}
	if text := s.LogValue().String(); !strings.Contains(text, "rack=eu-west-1a") {
		t.Fatalf("startup log lacks rack: %s", text)
	}
	if s := mustLoad(t, []string{"--rack", "r2"}, nil); s.Rack != "r2" {
		t.Fatalf("Rack = %q from the flag, want r2", s.Rack)
	}
}

// re-replicate-after: 0 (never) is allowed, and the value is part of the startup log line.
func TestReReplicateAfterZeroAndLogged(t *testing.T) {
	s := mustLoad(t, nil, map[string]string{"NARAD_RE_REPLICATE_AFTER": "0s"})
	if s.ReReplicateAfter != 0 {
		t.Fatalf("ReReplicateAfter = %s, want 0", s.ReReplicateAfter)
	}
	s = mustLoad(t, []string{"--re-replicate-after=90s"}, nil)
	if text := s.LogValue().String(); !strings.Contains(text, "re_replicate_after=1m30s") {
		t.Fatalf("startup log lacks re_replicate_after: %s", text)
	}
}

// --rack-file: the rack is the file's trimmed content; an empty file means no rack; content
// that is no rack name is refused naming the file.
func TestRackFromFile(t *testing.T) {
	s := mustLoad(t, []string{"--rack-file", writeFile(t, "rack", "  europe-west1-b\n")}, nil)
	if s.Rack != "europe-west1-b" {
		t.Fatalf("Rack = %q from the file, want europe-west1-b", s.Rack)
	}
	if text := s.LogValue().String(); !strings.Contains(text, "rack=europe-west1-b") || !strings.Contains(text, "rack_file=") {
		t.Fatalf("startup log lacks rack or rack_file: %s", text)
	}
	if s := mustLoad(t, nil, map[string]string{"NARAD_RACK_FILE": writeFile(t, "empty", "\n")}); s.Rack != "" {
		t.Fatalf("Rack = %q from an empty file, want none", s.Rack)
	}
	_, err := load(t, []string{"--rack-file", writeFile(t, "bad", "eu west")}, nil)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "rack-file" || !strings.Contains(err.Error(), "must be 1-64 characters") {
		t.Fatalf("bad rack in the file: %v", err)
	}
}

// --default-min-insync-replicas defaults to 0 (min(2, R)) and is read from the config file.
func TestDefaultMinInsyncFromFile(t *testing.T) {
	if s := mustLoad(t, nil, nil); s.DefaultMinInsyncReplicas != 0 {
		t.Fatalf("DefaultMinInsyncReplicas = %d by default, want 0", s.DefaultMinInsyncReplicas)
	}
	s := mustLoad(t, []string{"--config", writeFile(t, "c.yaml", "default-min-insync-replicas: 3\n")}, nil)
	if s.DefaultMinInsyncReplicas != 3 {
		t.Fatalf("DefaultMinInsyncReplicas = %d from the file, want 3", s.DefaultMinInsyncReplicas)
	}
	if text := s.LogValue().String(); !strings.Contains(text, "default_min_insync_replicas=3") {
		t.Fatalf("startup log lacks default_min_insync_replicas: %s", text)
	}
}
