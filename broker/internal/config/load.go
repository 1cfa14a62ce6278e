package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// FieldError is a configuration error about one field (a flag name). Its message is one line:
// "config: <field>: <reason>".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return "config: " + e.Field + ": " + strings.ReplaceAll(e.Reason, "\n", " ")
}

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// hostname is os.Hostname; tests replace it.
var hostname = os.Hostname

// Load resolves and validates the serve configuration. fs must already be parsed (it may lack
// some of the flags, e.g. for `narad server start`); getenv nil means os.Getenv.
//
// Each setting comes from the first of: a flag set on the command line; the environment
// (NARAD_<FLAG> with '-' → '_', then its aliases; an empty variable counts as unset); the
// config file named by --config / NARAD_CONFIG; the default. Defaults of http-addr,
// cluster-addr, log-format and security-enabled depend on the resolved dev setting.
func Load(fs *pflag.FlagSet, getenv func(string) string) (Serve, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	r := &resolver{fs: fs, getenv: getenv}
	if path := r.get(optConfig).raw; path != "" {
		file, err := readConfigFile(path)
		if err != nil {
			return Serve{}, err
		}
		r.file, r.filePath = file, path
	}
	b := &builder{r: r}
	s := Serve{ConfigFile: r.filePath}
	s.Dev = b.boolean(optDev)
	s.DataDir = b.str(optDataDir)
	s.HTTPAddr = b.strOr(optHTTPAddr, pick(s.Dev, DevHTTPAddr, DefaultHTTPAddr))
	s.ClusterAddr = b.strOr(optClusterAddr, pick(s.Dev, DevClusterAddr, DefaultClusterAddr))
	s.AdvertiseAddr = b.str(optAdvertiseAddr)
	s.NodeID = b.str(optNodeID)
	s.Join = b.list(optJoin)
	s.Bootstrap = b.boolean(optBootstrap)
	s.LogLevel = strings.ToLower(b.str(optLogLevel))
	s.LogFormat = strings.ToLower(b.strOr(optLogFormat, pick(s.Dev, "text", "json")))
	s.PprofAddr = b.str(optPprofAddr)
	s.SecurityEnabled = b.boolean(optSecurityEnabled)
	if !r.get(optSecurityEnabled).set {
		s.SecurityEnabled = !s.Dev // --dev forces security off unless explicitly set
	}
	s.AdminUser = b.str(optAdminUser)
	s.AdminPassword = b.secret(optAdminPassword, optAdminPasswordFile)
	s.ClusterSecret = b.secret(optClusterSecret, optClusterSecretFile)
	s.StorageCodec = strings.ToLower(b.str(optStorageCodec))
	s.StorageCompressionLevel = strings.ToLower(b.str(optStorageCompression))
	s.MaxConsumeWait = b.duration(optMaxConsumeWait)
	s.TopicDefaultPartitions = int(b.integer(optDefaultPartitions, 32))
	s.TopicMaxPartitions = int(b.integer(optMaxPartitions, 32))
	s.TopicDefaultRetentionMs = b.integer(optDefaultRetentionMs, 64)
	s.IdleLogEviction = b.duration(optIdleLogEviction)
	s.ShutdownGrace = b.duration(optShutdownGrace)
	s.HTTPReadTimeout = b.duration(optHTTPReadTimeout)
	s.HTTPWriteTimeout = b.duration(optHTTPWriteTimeout)
	s.HTTPIdleTimeout = b.duration(optHTTPIdleTimeout)
	s.HTTPFastPath = b.boolean(optHTTPFastPath)
	s.TLSCertFile = b.str(optTLSCert)
	s.TLSKeyFile = b.str(optTLSKey)
	s.ClusterTLSCAFile = b.str(optClusterTLSCA)
	s.InitialMembers = b.list(optInitialMembers)
	s.HeartbeatInterval = b.duration(optHeartbeatInterval)
	s.HeartbeatTimeout = b.duration(optHeartbeatTimeout)
	s.ForcePromoteAfter = b.duration(optForcePromoteAfter)
	s.DeadTargetAbortAfter = b.duration(optDeadTargetAbort)
	s.ReplicaFailoverAfter = b.duration(optReplicaFailover)
	s.ReReplicateAfter = b.duration(optReReplicate)
	s.DefaultReplicationFactor = int(b.integer(optDefaultReplication, 32))
	s.DefaultMinInsyncReplicas = int(b.integer(optDefaultMinInsync, 32))
	s.Rack = b.str(optRack)
	s.RackFile = b.str(optRackFile)
	if s.RackFile != "" {
		s.Rack = b.rackFromFile(s.Rack, s.RackFile)
	}
	s.RemoteAllowedHosts = b.list(optRemoteAllowedHosts)
	s.FanoutMaxBatchRecords = int(b.integer(optFanoutMaxRecords, 32))
	s.FanoutMaxBatchBytes = int(b.integer(optFanoutMaxBytes, 32))
	s.MaxMovesInFlight = int(b.integer(optMaxMovesInFlight, 32))
	s.MinVoters = int(b.integer(optMinVoters, 32))
	s.MaxConnections = int(b.integer(optMaxConnections, 32))
	s.MaxConnectionsPerIP = int(b.integer(optMaxConnectionsPerIP, 32))
	s.ClusterMaxConnections = int(b.integer(optClusterMaxConnections, 32))
	s.ClusterMaxConnectionsPerIP = int(b.integer(optClusterMaxConnectionsPerIP, 32))
	s.TrustedProxies = b.list(optTrustedProxies)
	s.MaxInflightRequestBytes = b.integer(optMaxInflightBytes, 64)
	s.MaxInflightAnswerBytes = b.integer(optMaxInflightAnswerBytes, 64)
	if b.err != nil {
		return Serve{}, b.err
	}
	if err := secretsOffArgv(&s, r); err != nil {
		return Serve{}, err
	}
	if s.NodeID == "" {
		h, err := hostname()
		if err != nil || h == "" {
			return Serve{}, fieldErr(optNodeID, "cannot determine the host name (%v); set it explicitly", err)
		}
		s.NodeID = h
	}
	if err := validate(&s, b.origin); err != nil {
		return Serve{}, err
	}
	return s, nil
}

// secretsOffArgv refuses --admin-password and --cluster-secret given as flags outside --dev:
// every local user reads a process's arguments (ps, /proc/<pid>/cmdline). With --dev the flag
// is accepted with a warning.
func secretsOffArgv(s *Serve, r *resolver) error {
	for _, o := range []struct{ name, file string }{
		{optAdminPassword, optAdminPasswordFile},
		{optClusterSecret, optClusterSecretFile},
	} {
		if !r.get(o.name).flag {
			continue
		}
		if !s.Dev {
			return fieldErr(o.name, "a secret given as a flag is visible to every local user (ps, /proc/<pid>/cmdline); "+
				"use --%s or %s (the flag is accepted only with --dev)", o.file, EnvName(o.name))
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("--%s was given on the command line, where ps and /proc/<pid>/cmdline "+
			"show it to every local user; use --%s or %s outside development", o.name, o.file, EnvName(o.name)))
	}
	return nil
}

func pick(dev bool, devValue, value string) string {
	if dev {
		return devValue
	}
	return value
}

// setting is the resolved text of one option and where it came from.
type setting struct {
	raw    string
	origin string // "flag --x", "env NARAD_X", "config file p"; "" for the default
	set    bool   // false: default
	flag   bool   // set on the command line
}

type resolver struct {
	fs       *pflag.FlagSet
	getenv   func(string) string
	file     map[string]string
	filePath string
}

func (r *resolver) get(name string) setting {
	o := optionsByName[name]
	if r.fs != nil {
		if f := r.fs.Lookup(name); f != nil && f.Changed {
			return setting{raw: flagText(r.fs, f), origin: "flag --" + name, set: true, flag: true}
		}
	}
	for _, env := range append([]string{EnvName(name)}, o.aliases...) {
		if v := r.getenv(env); v != "" {
			return setting{raw: v, origin: "env " + env, set: true}
		}
	}
	if v, ok := r.file[name]; ok {
		return setting{raw: v, origin: "config file " + r.filePath, set: true}
	}
	return setting{raw: o.def}
}

// flagText renders a changed flag as the text its other sources would carry.
func flagText(fs *pflag.FlagSet, f *pflag.Flag) string {
	if f.Value.Type() == "stringSlice" {
		if v, err := fs.GetStringSlice(f.Name); err == nil {
			return strings.Join(v, ",")
		}
	}
	return f.Value.String()
}

// builder parses settings, keeping the first error.
type builder struct {
	r       *resolver
	err     error
	origins map[string]string
}

func (b *builder) get(name string) setting {
	s := b.r.get(name)
	if s.set {
		if b.origins == nil {
			b.origins = map[string]string{}
		}
		b.origins[name] = s.origin
	}
	return s
}

// origin is " (from <source>)" for an explicitly set field, "" for a default.
func (b *builder) origin(name string) string {
	if o := b.origins[name]; o != "" {
		return " (from " + o + ")"
	}
	return ""
}

func (b *builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *builder) str(name string) string { return b.get(name).raw }

func (b *builder) strOr(name, def string) string {
	if s := b.get(name); s.set {
		return s.raw
	}
	return def
}

func (b *builder) boolean(name string) bool {
	s := b.get(name)
	v, err := strconv.ParseBool(strings.TrimSpace(s.raw))
	if err != nil {
		b.fail(fieldErr(name, "invalid boolean %q%s", clip(s.raw), b.origin(name)))
	}
	return v
}

func (b *builder) integer(name string, bits int) int64 {
	s := b.get(name)
	v, err := strconv.ParseInt(strings.TrimSpace(s.raw), 10, bits)
	if err != nil {
		b.fail(fieldErr(name, "invalid integer %q%s", clip(s.raw), b.origin(name)))
	}
	return v
}

func (b *builder) duration(name string) time.Duration {
	s := b.get(name)
	v, err := time.ParseDuration(strings.TrimSpace(s.raw))
	if err != nil {
		b.fail(fieldErr(name, "invalid duration %q, want Go syntax like 10s%s", clip(s.raw), b.origin(name)))
	}
	return v
}

func (b *builder) list(name string) []string {
	var out []string
	for _, part := range strings.Split(b.get(name).raw, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// secret resolves a value that may be given inline (name) or as a file (fileName), not both.
// The file's trailing newlines are trimmed. Values are never echoed in errors.
func (b *builder) secret(name, fileName string) string {
	inline := b.get(name)
	file := b.get(fileName)
	switch {
	case inline.raw != "" && file.raw != "":
		b.fail(fieldErr(name, "set %s or %s, not both", name, fileName))
		return ""
	case file.raw == "":
		return inline.raw
	}
	data, err := os.ReadFile(file.raw)
	if err != nil {
		b.fail(fieldErr(fileName, "%v%s", err, b.origin(fileName)))
		return ""
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		b.fail(fieldErr(fileName, "file %s is empty", file.raw))
	}
	return v
}

// rackFromFile reads --rack from path (--rack-file): white space around it is trimmed, an
// empty file means no rack, a missing or unreadable one is an error, and so is --rack given
// as well. The content is checked by validate like --rack.
func (b *builder) rackFromFile(rack, path string) string {
	if rack != "" {
		b.fail(fieldErr(optRackFile, "set rack or rack-file, not both"))
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.fail(fieldErr(optRackFile, "%v%s", err, b.origin(optRackFile)))
		return ""
	}
	return strings.TrimSpace(string(data))
}

// clip bounds text echoed into an error message.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
