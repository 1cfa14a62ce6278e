package meta

// ValidTopicName reports whether name matches ^[A-Za-z0-9._-]{1,255}$ and is not "." or ".."
// (docs/internals/http-api.md §1.7).
func ValidTopicName(name string) bool {
	return name != "." && name != ".." && validName(name, 255)
}

// ValidUsername reports whether name matches ^[A-Za-z0-9._-]{1,64}$ (docs/internals/http-api.md §1.7).
func ValidUsername(name string) bool { return validName(name, 64) }

func validName(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// validNodeID accepts any non-empty ID without NUL (node IDs are pod names; keys use 0x00 as
// a separator).
func validNodeID(id string) bool {
	if id == "" || len(id) > 255 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			return false
		}
	}
	return true
}

// checkTopicFields validates the numeric fields every stored topic must satisfy. Range rules
// that depend on configuration (maximum partitions, minimum retention) are the proposer's.
func checkTopicFields(t Topic) (Result, bool) {
	switch {
	case !ValidTopicName(t.Name):
		return invalid("bad topic name %q", t.Name), false
	case t.Partitions < 1:
		return invalid("topic %q: partitions %d < 1", t.Name, t.Partitions), false
	case t.RetentionMs < 0:
		return invalid("topic %q: negative retention_ms", t.Name), false
	case t.VisibilityTimeoutMs < 0, t.MaxInFlightPerPartition < 0, t.MaxAckedAheadPerPartition < 0:
		return invalid("topic %q: negative limit", t.Name), false
	case t.ReplicationFactor < 0 || t.ReplicationFactor > MaxReplicationFactor:
		return invalid("topic %q: replication_factor %d not in 1…%d", t.Name, t.ReplicationFactor, MaxReplicationFactor), false
	case t.MinInsyncReplicas < 0 || t.MinInsyncReplicas > t.RF():
		return invalid("topic %q: min_insync_replicas %d not in 1…%d", t.Name, t.MinInsyncReplicas, t.RF()), false
	}
	return Result{}, true
}

// retentionCoversDelay is the delay-child rule (docs/internals/http-api.md §1.7): a parent of a delay child
// (delay > 0) keeps records forever (0) or for at least delay + 1 h.
func retentionCoversDelay(retentionMs, delayMs int64) bool {
	return delayMs == 0 || retentionMs == 0 || retentionMs >= delayMs+MinRetentionMs
}
