package topic

import (
	"errors"
	"fmt"
	"strings"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
)

// createRequest is the POST /v1/topics body for t. Absent optional fields are left to the
// brokers' defaults (retention nil = the cluster default, 0 = keep forever).
func createRequest(t *naradv1.Topic) client.CreateTopicRequest {
	req := client.CreateTopicRequest{
		Name:                      t.Spec.Name,
		Partitions:                int(t.Spec.Partitions),
		RetentionMs:               t.Spec.RetentionMs,
		VisibilityTimeoutMs:       deref(t.Spec.VisibilityTimeoutMs),
		MaxInFlightPerPartition:   deref(t.Spec.MaxInFlightPerPartition),
		MaxAckedAheadPerPartition: deref(t.Spec.MaxAckedAheadPerPartition),
	}
	if doc, err := canonicalSchema(t.Spec.Schema); err == nil {
		req.Schema = doc
	}
	if r := t.Spec.ReplicationFactor; r != nil {
		req.ReplicationFactor = int(*r)
	}
	if m := t.Spec.MinInSyncReplicas; m != nil {
		req.MinInsyncReplicas = int(*m)
	}
	return req
}

// driftAlter is the PATCH that brings the broker topic b to spec (schema aside): partitions
// grow to spec; retention, visibility and the two limits are set where spec sets them and
// differ. shrink reports a broker topic with more partitions than spec, which is never
// altered (partitions only grow).
func driftAlter(spec naradv1.TopicSpec, b client.Topic) (req client.AlterTopicRequest, shrink bool) {
	if want := int(spec.Partitions); want > b.Partitions {
		req.Partitions = &want
	} else if want > 0 && want < b.Partitions {
		shrink = true
	}
	req.RetentionMs = differs(spec.RetentionMs, b.RetentionMs)
	req.VisibilityTimeoutMs = differs(spec.VisibilityTimeoutMs, b.VisibilityTimeoutMs)
	req.MaxInFlightPerPartition = differs(spec.MaxInFlightPerPartition, b.MaxInFlightPerPartition)
	req.MaxAckedAheadPerPartition = differs(spec.MaxAckedAheadPerPartition, b.MaxAckedAheadPerPartition)
	req.ReplicationFactor = differsInt(spec.ReplicationFactor, observedRF(b))
	req.MinInsyncReplicas = differsInt(spec.MinInSyncReplicas, b.MinInsyncReplicas)
	return req, shrink
}

// splitReplication splits an alter into its replication fields and the rest.
func splitReplication(a client.AlterTopicRequest) (base, repl client.AlterTopicRequest) {
	repl.ReplicationFactor, repl.MinInsyncReplicas = a.ReplicationFactor, a.MinInsyncReplicas
	a.ReplicationFactor, a.MinInsyncReplicas = nil, nil
	return a, repl
}

// observedRF is the broker topic's replication factor; an unreplicated topic may omit it.
func observedRF(b client.Topic) int { return max(1, b.ReplicationFactor) }

// differsInt is differs for the replication settings.
func differsInt(want *int32, have int) *int {
	if want == nil || int(*want) == have {
		return nil
	}
	v := int(*want)
	return &v
}

// differs returns want when it is set and differs from have, else nil (not supplied).
func differs(want *int64, have int64) *int64 {
	if want == nil || *want == have {
		return nil
	}
	v := *want
	return &v
}

// describeAlter renders the supplied fields of an alter for events and messages.
func describeAlter(a client.AlterTopicRequest) string {
	var parts []string
	add := func(name string, v *int64) {
		if v != nil {
			parts = append(parts, fmt.Sprintf("%s=%d", name, *v))
		}
	}
	if a.Partitions != nil {
		parts = append(parts, fmt.Sprintf("partitions=%d", *a.Partitions))
	}
	add("retention_ms", a.RetentionMs)
	add("visibility_timeout_ms", a.VisibilityTimeoutMs)
	add("max_in_flight_per_partition", a.MaxInFlightPerPartition)
	add("max_acked_ahead_per_partition", a.MaxAckedAheadPerPartition)
	if a.ReplicationFactor != nil {
		parts = append(parts, fmt.Sprintf("replication_factor=%d", *a.ReplicationFactor))
	}
	if a.MinInsyncReplicas != nil {
		parts = append(parts, fmt.Sprintf("min_insync_replicas=%d", *a.MinInsyncReplicas))
	}
	if len(a.Schema) > 0 {
		parts = append(parts, "schema")
	}
	return strings.Join(parts, ", ")
}

// mentionsSchema guesses whether a refused create was refused for its schema. The API gives no
// machine-readable field for it (docs/internals/http-api.md §1.5), so this only picks the condition reason;
// the message always carries the brokers' own words.
func mentionsSchema(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && strings.Contains(strings.ToLower(e.Message), "schema")
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
