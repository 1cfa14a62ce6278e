package api

import (
	"encoding/json"
	"fmt"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/schema"
	"narad.dev/broker/internal/service"
)

// validTopicName applies the name rule of docs/internals/http-api.md §1.7: ^[A-Za-z0-9._-]{1,255}$, not "." or "..".
func validTopicName(s string) bool {
	if len(s) == 0 || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// checkRetention applies the retention rule: 0 = keep forever, otherwise 1 h … 3,650 days.
func checkRetention(ms int64) error {
	if ms < 0 || (ms > 0 && ms < meta.MinRetentionMs) || ms > meta.MaxRetentionMs {
		return &fieldError{Field: "retention_ms", msg: fmt.Sprintf(
			"retention_ms must be 0 (keep forever) or %d…%d", meta.MinRetentionMs, meta.MaxRetentionMs)}
	}
	return nil
}

// limitFields are the per-topic limits of create and alter with their maxima; 0 means the
// default (docs/consuming.md, Visibility timeout and flow control).
var limitFields = []struct {
	name string
	max  int64
}{
	{"visibility_timeout_ms", meta.MaxVisibilityTimeoutMs},
	{"max_in_flight_per_partition", meta.MaxInFlightPerPartitionLimit},
	{"max_acked_ahead_per_partition", meta.MaxAckedAheadPerPartition},
}

// checkLimit applies 0 … max to one of limitFields.
func checkLimit(name string, v, max int64) error {
	if v < 0 || v > max {
		return &fieldError{Field: name, msg: fmt.Sprintf("%s must be 0 (default) … %d, not %d", name, max, v)}
	}
	return nil
}

// fieldError is a 400 that names the offending body field in the error body ("field").
type fieldError struct {
	Field string
	msg   string
}

func (e *fieldError) Error() string               { return e.msg }
func (e *fieldError) Unwrap() error               { return ErrInvalid }
func (e *fieldError) ErrorFields() map[string]any { return map[string]any{"field": e.Field} }

// checkSchemaDoc compiles a JSON Schema document; failure is a 400.
func checkSchemaDoc(doc json.RawMessage) error {
	if _, err := schema.Compile(doc); err != nil {
		return invalidf("invalid schema: %v", err)
	}
	return nil
}

// validateCreate is the field-validation step of docs/internals/http-api.md §2.2 (every failure is a 400). It
// does not look at any stored state; owner is filled in by the caller.
func validateCreate(b *createTopicBody, maxPartitions int) (service.CreateTopicRequest, error) {
	if b.Name == "" {
		return service.CreateTopicRequest{}, invalidf("name is required")
	}
	if !validTopicName(b.Name) {
		return service.CreateTopicRequest{}, invalidf("invalid topic name %q: want 1…255 of [A-Za-z0-9._-], not \".\" or \"..\"", b.Name)
	}
	if b.Partitions != 0 && (b.Partitions < meta.MinPartitions || b.Partitions > maxPartitions) {
		return service.CreateTopicRequest{}, invalidf("partitions must be %d…%d (0 = default)", meta.MinPartitions, maxPartitions)
	}
	if b.RetentionMs != nil {
		if err := checkRetention(*b.RetentionMs); err != nil {
			return service.CreateTopicRequest{}, err
		}
	}
	for i, v := range []int64{b.VisibilityTimeoutMs, b.MaxInFlightPerPartition, b.MaxAckedAheadPerPartition} {
		if err := checkLimit(limitFields[i].name, v, limitFields[i].max); err != nil {
			return service.CreateTopicRequest{}, err
		}
	}
	var doc json.RawMessage
	if !isAbsentJSON(b.Schema) {
		if err := checkSchemaDoc(b.Schema); err != nil {
			return service.CreateTopicRequest{}, err
		}
		doc = b.Schema
	}
	if b.Parent != "" {
		if !validTopicName(b.Parent) {
			return service.CreateTopicRequest{}, invalidf("invalid parent topic name %q", b.Parent)
		}
		if b.Parent == b.Name {
			return service.CreateTopicRequest{}, invalidf("a topic cannot be its own parent")
		}
	} else if b.FanoutDelayMs != 0 {
		return service.CreateTopicRequest{}, invalidf("fanout_delay_ms requires parent")
	}
	if b.FanoutDelayMs < 0 || b.FanoutDelayMs > meta.MaxDelayMs {
		return service.CreateTopicRequest{}, invalidf("fanout_delay_ms must be 0…%d", meta.MaxDelayMs)
	}
	if err := checkReplication(b.ReplicationFactor, b.MinInsyncReplicas); err != nil {
		return service.CreateTopicRequest{}, err
	}
	return service.CreateTopicRequest{
		Name:                      b.Name,
		Partitions:                b.Partitions,
		RetentionMs:               b.RetentionMs,
		VisibilityTimeoutMs:       b.VisibilityTimeoutMs,
		MaxInFlightPerPartition:   b.MaxInFlightPerPartition,
		MaxAckedAheadPerPartition: b.MaxAckedAheadPerPartition,
		Schema:                    doc,
		Parent:                    b.Parent,
		FanoutDelayMs:             b.FanoutDelayMs,
		ReplicationFactor:         b.ReplicationFactor,
		MinInsyncReplicas:         b.MinInsyncReplicas,
		UncleanLeaderElection:     b.UncleanLeaderElection,
	}, nil
}

// checkReplication is the stateless check of a create's replication fields
// (docs/replication.md): R 0 (the cluster default) or 1…5; M 0 (min(2, R)) or 1…R, where an R
// of 0 allows any M up to 5 (the default R is known only to the engine, which checks again).
func checkReplication(r, m int) error {
	if r < 0 || r > meta.MaxReplicationFactor {
		return &fieldError{Field: "replication_factor", msg: fmt.Sprintf("replication_factor must be 0 (default) … %d, not %d", meta.MaxReplicationFactor, r)}
	}
	limit := r
	if r == 0 {
		limit = meta.MaxReplicationFactor
	}
	if m < 0 || m > limit {
		return &fieldError{Field: "min_insync_replicas", msg: fmt.Sprintf("min_insync_replicas must be 0 (default) … %d (the replication factor), not %d", limit, m)}
	}
	return nil
}

// validateAlter is the first step of docs/internals/http-api.md §2.5 (JSON syntax and field validation, all
// 400): at least one field supplied, each within its stateless bounds. The comparison with
// the current partition count and schema happens after the 404.
func validateAlter(b *alterTopicBody, maxPartitions int) (service.AlterTopicRequest, error) {
	var req service.AlterTopicRequest
	supplied := 0
	if b.Partitions != nil && *b.Partitions != 0 { // 0 = not supplied
		if *b.Partitions < 0 || *b.Partitions > maxPartitions {
			return req, invalidf("partitions must be greater than the current count and at most %d", maxPartitions)
		}
		req.Partitions = *b.Partitions
		supplied++
	}
	if b.RetentionMs != nil {
		if err := checkRetention(*b.RetentionMs); err != nil {
			return req, err
		}
		req.RetentionMs = b.RetentionMs
		supplied++
	}
	for i, f := range []struct {
		v   *int64
		dst **int64
	}{
		{b.VisibilityTimeoutMs, &req.VisibilityTimeoutMs},
		{b.MaxInFlightPerPartition, &req.MaxInFlightPerPartition},
		{b.MaxAckedAheadPerPartition, &req.MaxAckedAheadPerPartition},
	} {
		if f.v == nil {
			continue
		}
		if err := checkLimit(limitFields[i].name, *f.v, limitFields[i].max); err != nil {
			return req, err
		}
		*f.dst = f.v
		supplied++
	}
	if !isAbsentJSON(b.Schema) {
		if err := checkSchemaDoc(b.Schema); err != nil {
			return req, err
		}
		req.Schema = b.Schema
		supplied++
	}
	n, err := validateAlterReplication(b, &req)
	if err != nil {
		return req, err
	}
	supplied += n
	if supplied == 0 {
		return req, invalidf("nothing to change: supply at least one of partitions, retention_ms, visibility_timeout_ms, max_in_flight_per_partition, max_acked_ahead_per_partition, schema, replication_factor, min_insync_replicas, unclean_leader_election")
	}
	return req, nil
}

// validateAlterReplication is the stateless check of an alter's replication fields
// (docs/internals/http-api.md §2.5): replication_factor 1 … 5, min_insync_replicas 0 (default)
// … 5 and, when both are supplied, at most replication_factor. It copies them into req and
// returns how many were supplied.
func validateAlterReplication(b *alterTopicBody, req *service.AlterTopicRequest) (int, error) {
	n := 0
	if b.ReplicationFactor != nil {
		if r := *b.ReplicationFactor; r < 1 || r > meta.MaxReplicationFactor {
			return 0, &fieldError{Field: "replication_factor", msg: fmt.Sprintf("replication_factor must be 1 … %d, not %d", meta.MaxReplicationFactor, r)}
		}
		req.ReplicationFactor = b.ReplicationFactor
		n++
	}
	if b.MinInsyncReplicas != nil {
		limit := meta.MaxReplicationFactor
		if b.ReplicationFactor != nil {
			limit = *b.ReplicationFactor
		}
		if m := *b.MinInsyncReplicas; m < 0 || m > limit {
			return 0, &fieldError{Field: "min_insync_replicas", msg: fmt.Sprintf("min_insync_replicas must be 0 (default) … %d (the replication factor), not %d", limit, m)}
		}
		req.MinInsyncReplicas = b.MinInsyncReplicas
		n++
	}
	if b.UncleanLeaderElection != nil {
		req.UncleanLeaderElection = b.UncleanLeaderElection
		n++
	}
	return n, nil
}

// checkAlterReplication is the stateful check of an alter's replication fields against the
// topic's current record t (after the 404): R cannot change between 1 and ≥ 2 (409, the
// write path differs), and the resulting min_insync_replicas must not exceed the resulting
// replication factor (400 naming the field that was supplied).
func checkAlterReplication(t meta.Topic, req service.AlterTopicRequest) error {
	next := replicationAfter(t, req)
	if next.RF() != t.RF() && (t.RF() == 1) != (next.RF() == 1) {
		return conflictf("replication_factor cannot change between 1 and %d on a live topic: recreate the topic", max(t.RF(), next.RF()))
	}
	if next.MinInsyncReplicas > next.RF() {
		field := "replication_factor"
		if req.MinInsyncReplicas != nil {
			field = "min_insync_replicas"
		}
		return &fieldError{Field: field, msg: fmt.Sprintf("min_insync_replicas %d would exceed replication_factor %d", next.MinInsyncReplicas, next.RF())}
	}
	return nil
}

// replicationAfter is t with req's replication settings applied (R 1 stored as 0, also when
// t held it as 1 and req leaves it alone).
func replicationAfter(t meta.Topic, req service.AlterTopicRequest) meta.Topic {
	if req.ReplicationFactor != nil {
		t.ReplicationFactor = *req.ReplicationFactor
	}
	if t.ReplicationFactor == 1 {
		t.ReplicationFactor = 0
	}
	if req.MinInsyncReplicas != nil {
		t.MinInsyncReplicas = *req.MinInsyncReplicas
	}
	if req.UncleanLeaderElection != nil {
		t.UncleanLeaderElection = *req.UncleanLeaderElection
	}
	return t
}
