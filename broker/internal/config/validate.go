package config

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"narad.dev/broker/internal/hostlist"
)

// Range limits (docs/internals/http-api.md §1.7).
const (
	MinPartitions   = 3
	MaxPartitions   = 108
	MinRetentionMs  = int64(3_600_000)       // 1 h; 0 = keep forever
	MaxRetentionMs  = int64(315_360_000_000) // 3,650 days, the API's maximum (docs/operating.md, Limits)
	MaxPasswordLen  = 72                     // bcrypt input limit (docs/operating.md, Security)
	maxNodeIDLen    = 255
	maxAdminUserLen = 64
	MaxRackLen      = 64 // --rack (docs/operating.md, Tunables)

	// Ranges of the seed tunables (docs/operating.md, Tunables). A slab's bytes stay well
	// inside one node RPC (16 MiB) with its largest record on top.
	MaxFanoutBatchRecords = 65536
	MinFanoutBatchBytes   = 1 << 10
	MaxFanoutBatchBytes   = 8 << 20
	MaxMovesInFlight      = 256
	MaxMinVoters          = 9

	// Range of replica-failover-after (docs/operating.md, Tunables): at least a second (the
	// heartbeat stamps' unit) and at most 5 min, beyond which a lost leader stops its
	// partitions for longer than the member verdict would.
	MinReplicaFailoverAfter = time.Second
	MaxReplicaFailoverAfter = 5 * time.Minute
	// MaxReReplicateAfter bounds re-replicate-after (0 = never).
	MaxReReplicateAfter = 7 * 24 * time.Hour
)

// validate checks every field and the rules between them. origin(name) is " (from …)" for an
// explicitly set field. The first failure is returned.
func validate(s *Serve, origin func(string) string) error {
	checks := []func() error{
		func() error {
			if s.DataDir == "" {
				return fieldErr(optDataDir, "must not be empty%s", origin(optDataDir))
			}
			return nil
		},
		func() error { return checkAddr(optHTTPAddr, s.HTTPAddr, false, origin) },
		func() error { return checkAddr(optClusterAddr, s.ClusterAddr, false, origin) },
		func() error {
			if s.AdvertiseAddr == "" {
				return nil
			}
			return checkAddr(optAdvertiseAddr, s.AdvertiseAddr, true, origin)
		},
		func() error {
			if !nameChars(s.NodeID, maxNodeIDLen) {
				return fieldErr(optNodeID, "%q must be 1-%d characters of A-Z a-z 0-9 . _ -%s", clip(s.NodeID), maxNodeIDLen, origin(optNodeID))
			}
			return nil
		},
		func() error {
			for _, p := range s.Join {
				if err := checkAddr(optJoin, p, true, origin); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return oneOf(optLogLevel, s.LogLevel, origin, "debug", "info", "warn", "error") },
		func() error {
			if _, err := hostlist.Parse(s.RemoteAllowedHosts); err != nil {
				return fieldErr(optRemoteAllowedHosts, "%v%s", err, origin(optRemoteAllowedHosts))
			}
			return nil
		},
		func() error { return oneOf(optLogFormat, s.LogFormat, origin, "json", "text") },
		func() error {
			if s.PprofAddr == "" {
				return nil
			}
			return checkAddr(optPprofAddr, s.PprofAddr, false, origin)
		},
		func() error {
			if !nameChars(s.AdminUser, maxAdminUserLen) {
				return fieldErr(optAdminUser, "%q must be 1-%d characters of A-Z a-z 0-9 . _ -%s", clip(s.AdminUser), maxAdminUserLen, origin(optAdminUser))
			}
			return nil
		},
		func() error {
			if len(s.AdminPassword) > MaxPasswordLen {
				return fieldErr(optAdminPassword, "longer than %d bytes%s", MaxPasswordLen, origin(optAdminPassword)+origin(optAdminPasswordFile))
			}
			return nil
		},
		func() error { return oneOf(optStorageCodec, s.StorageCodec, origin, "none", "zstd") },
		func() error {
			return oneOf(optStorageCompression, s.StorageCompressionLevel, origin, "fastest", "default", "better", "best")
		},
		func() error { return nonNegative(optMaxConsumeWait, s.MaxConsumeWait, origin) },
		func() error { return nonNegative(optIdleLogEviction, s.IdleLogEviction, origin) },
		func() error { return positive(optShutdownGrace, s.ShutdownGrace, origin) },
		func() error { return positive(optHTTPReadTimeout, s.HTTPReadTimeout, origin) },
		func() error { return positive(optHTTPWriteTimeout, s.HTTPWriteTimeout, origin) },
		func() error { return positive(optHTTPIdleTimeout, s.HTTPIdleTimeout, origin) },
		func() error {
			return connCaps(optMaxConnections, optMaxConnectionsPerIP, s.MaxConnections, s.MaxConnectionsPerIP, origin)
		},
		func() error {
			return connCaps(optClusterMaxConnections, optClusterMaxConnectionsPerIP, s.ClusterMaxConnections, s.ClusterMaxConnectionsPerIP, origin)
		},
		func() error {
			if s.MaxConsumeWait >= s.HTTPWriteTimeout {
				return fieldErr(optMaxConsumeWait, "must be below http-write-timeout (%s)", s.HTTPWriteTimeout)
			}
			return nil
		},
		func() error {
			if s.MaxConsumeWait > s.ShutdownGrace {
				return fieldErr(optMaxConsumeWait, "must not exceed shutdown-grace (%s)", s.ShutdownGrace)
			}
			return nil
		},
		func() error {
			if s.TopicMaxPartitions < MinPartitions || s.TopicMaxPartitions > MaxPartitions {
				return fieldErr(optMaxPartitions, "%d outside %d…%d%s", s.TopicMaxPartitions, MinPartitions, MaxPartitions, origin(optMaxPartitions))
			}
			return nil
		},
		func() error {
			if s.TopicDefaultPartitions < MinPartitions || s.TopicDefaultPartitions > s.TopicMaxPartitions {
				return fieldErr(optDefaultPartitions, "%d outside %d…topic-max-partitions (%d)%s", s.TopicDefaultPartitions, MinPartitions, s.TopicMaxPartitions, origin(optDefaultPartitions))
			}
			return nil
		},
		func() error {
			if r := s.TopicDefaultRetentionMs; r != 0 && (r < MinRetentionMs || r > MaxRetentionMs) {
				return fieldErr(optDefaultRetentionMs, "%d must be 0 (keep forever) or at least %d and at most %d%s", r, MinRetentionMs, MaxRetentionMs, origin(optDefaultRetentionMs))
			}
			return nil
		},
		func() error {
			if len(s.Join) > 0 && s.ClusterSecret == "" {
				return fieldErr(optClusterSecret, "required when join is set (set cluster-secret-file or %s)", EnvName(optClusterSecret))
			}
			return nil
		},
		func() error {
			seen := make(map[string]bool, len(s.InitialMembers))
			for _, id := range s.InitialMembers {
				if !nameChars(id, maxNodeIDLen) {
					return fieldErr(optInitialMembers, "%q is not a node ID (1-%d characters of A-Z a-z 0-9 . _ -)%s", clip(id), maxNodeIDLen, origin(optInitialMembers))
				}
				if seen[id] {
					return fieldErr(optInitialMembers, "lists %q twice%s", clip(id), origin(optInitialMembers))
				}
				seen[id] = true
			}
			return nil
		},
		func() error { return positive(optHeartbeatInterval, s.HeartbeatInterval, origin) },
		func() error { return positive(optHeartbeatTimeout, s.HeartbeatTimeout, origin) },
		func() error { return positive(optForcePromoteAfter, s.ForcePromoteAfter, origin) },
		func() error { return positive(optDeadTargetAbort, s.DeadTargetAbortAfter, origin) },
		func() error {
			if s.HeartbeatTimeout <= s.HeartbeatInterval {
				return fieldErr(optHeartbeatTimeout, "must exceed heartbeat-interval (%s)%s", s.HeartbeatInterval, origin(optHeartbeatTimeout))
			}
			return nil
		},
		func() error {
			if d := s.ReReplicateAfter; d < 0 || d > MaxReReplicateAfter {
				return fieldErr(optReReplicate, "%s outside 0…%s%s", d, MaxReReplicateAfter, origin(optReReplicate))
			}
			return nil
		},
		func() error {
			d := s.ReplicaFailoverAfter
			if d < MinReplicaFailoverAfter || d > MaxReplicaFailoverAfter {
				return fieldErr(optReplicaFailover, "%s outside %s…%s%s", d, MinReplicaFailoverAfter, MaxReplicaFailoverAfter, origin(optReplicaFailover))
			}
			if d <= s.HeartbeatInterval {
				// A live leader would be replaced between two of its heartbeats.
				return fieldErr(optReplicaFailover, "must exceed heartbeat-interval (%s)%s", s.HeartbeatInterval, origin(optReplicaFailover))
			}
			return nil
		},
		func() error {
			return intRange(optFanoutMaxRecords, s.FanoutMaxBatchRecords, 1, MaxFanoutBatchRecords, origin)
		},
		func() error {
			return intRange(optFanoutMaxBytes, s.FanoutMaxBatchBytes, MinFanoutBatchBytes, MaxFanoutBatchBytes, origin)
		},
		func() error { return intRange(optMaxMovesInFlight, s.MaxMovesInFlight, 1, MaxMovesInFlight, origin) },
		func() error { return intRange(optDefaultReplication, s.DefaultReplicationFactor, 1, 5, origin) },
		func() error { return intRange(optDefaultMinInsync, s.DefaultMinInsyncReplicas, 0, 5, origin) },
		func() error {
			if s.Rack != "" && !nameChars(s.Rack, MaxRackLen) {
				if s.RackFile != "" {
					return fieldErr(optRackFile, "%s holds %q; a rack must be 1-%d characters of A-Z a-z 0-9 . _ -", s.RackFile, clip(s.Rack), MaxRackLen)
				}
				return fieldErr(optRack, "%q must be 1-%d characters of A-Z a-z 0-9 . _ -%s", clip(s.Rack), MaxRackLen, origin(optRack))
			}
			return nil
		},
		func() error {
			if err := intRange(optMinVoters, s.MinVoters, 1, MaxMinVoters, origin); err != nil {
				return err
			}
			if s.MinVoters%2 == 0 {
				return fieldErr(optMinVoters, "%d must be odd (an even voter count tolerates no more failures than the odd one below it)%s", s.MinVoters, origin(optMinVoters))
			}
			return nil
		},
		func() error {
			if s.MaxInflightRequestBytes < MinInflightRequestBytes {
				return fieldErr(optMaxInflightBytes, "%d is below %d, one full batch produce body%s", s.MaxInflightRequestBytes, MinInflightRequestBytes, origin(optMaxInflightBytes))
			}
			return nil
		},
		func() error {
			if s.MaxInflightAnswerBytes < MinInflightAnswerBytes {
				return fieldErr(optMaxInflightAnswerBytes, "%d is below %d, one full consume answer%s", s.MaxInflightAnswerBytes, MinInflightAnswerBytes, origin(optMaxInflightAnswerBytes))
			}
			return nil
		},
		func() error { return checkTLSFiles(s, origin) },
		func() error {
			if samePort(s.HTTPAddr, s.ClusterAddr) {
				return fieldErr(optClusterAddr, "%s collides with http-addr %s", s.ClusterAddr, s.HTTPAddr)
			}
			return nil
		},
		func() error { return checkPprof(s, origin) },
		func() error {
			for _, p := range s.TrustedProxies {
				if _, err := netip.ParsePrefix(p); err == nil {
					continue
				}
				if _, err := netip.ParseAddr(p); err != nil {
					return fieldErr(optTrustedProxies, "%q is neither an IP address nor a CIDR prefix%s", clip(p), origin(optTrustedProxies))
				}
			}
			return nil
		},
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkPprof keeps pprof off the API and cluster ports, and, with security off (no credentials
// to ask for), on a loopback address.
func checkPprof(s *Serve, origin func(string) string) error {
	if s.PprofAddr == "" {
		return nil
	}
	for _, other := range []struct{ name, addr string }{{optHTTPAddr, s.HTTPAddr}, {optClusterAddr, s.ClusterAddr}} {
		if samePort(s.PprofAddr, other.addr) {
			return fieldErr(optPprofAddr, "%s collides with %s %s%s", s.PprofAddr, other.name, other.addr, origin(optPprofAddr))
		}
	}
	if s.SecurityEnabled {
		return nil
	}
	host, _, _ := net.SplitHostPort(s.PprofAddr)
	if a, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !a.IsLoopback()) {
		return fieldErr(optPprofAddr, "%q must be a loopback address while security is off (nobody is asked for credentials)%s",
			clip(s.PprofAddr), origin(optPprofAddr))
	}
	return nil
}

// checkAddr requires host:port with a numeric port; needHost also requires a host and a
// non-zero port (an address others dial rather than one to listen on).
func checkAddr(field, addr string, needHost bool, origin func(string) string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fieldErr(field, "%q is not host:port%s", clip(addr), origin(field))
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fieldErr(field, "%q has no numeric port 0-65535%s", clip(addr), origin(field))
	}
	if needHost && (host == "" || n == 0) {
		return fieldErr(field, "%q needs a host and a non-zero port%s", clip(addr), origin(field))
	}
	return nil
}

// samePort reports whether two listen addresses would bind the same port on an overlapping host.
func samePort(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb || pa == "0" {
		return false
	}
	return ha == hb || ha == "" || hb == "" || ha == "0.0.0.0" || hb == "0.0.0.0" || ha == "::" || hb == "::"
}

func oneOf(field, v string, origin func(string) string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return fieldErr(field, "%q is not one of %v%s", clip(v), allowed, origin(field))
}

func intRange(field string, v, lo, hi int, origin func(string) string) error {
	if v < lo || v > hi {
		return fieldErr(field, "%d outside %d…%d%s", v, lo, hi, origin(field))
	}
	return nil
}

func nonNegative(field string, d time.Duration, origin func(string) string) error {
	if d < 0 {
		return fieldErr(field, "must not be negative%s", origin(field))
	}
	return nil
}

func positive(field string, d time.Duration, origin func(string) string) error {
	if d <= 0 {
		return fieldErr(field, "must be positive%s", origin(field))
	}
	return nil
}

// nameChars reports whether s is 1…max bytes of A-Z a-z 0-9 . _ -.
func nameChars(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// connCaps checks a pair of connection caps: both ≥ 1, the per-IP one at most the total.
func connCaps(totalOpt, perIPOpt string, total, perIP int, origin func(string) string) error {
	if total < 1 {
		return fieldErr(totalOpt, "%d must be at least 1%s", total, origin(totalOpt))
	}
	if perIP < 1 || perIP > total {
		return fieldErr(perIPOpt, "%d must be 1…%s (%d)%s", perIP, totalOpt, total, origin(perIPOpt))
	}
	return nil
}
