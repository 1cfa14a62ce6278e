package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// Raft roles of a member (docs/internals/http-api.md §2.16).
const drainRoleNone = "none" // removed from the Raft configuration

// topicDescribeConcurrency is how many topics are described at once to sum a draining node's bytes
// (docs/internals/metastore.md §14: stats fetch concurrency 16).
const topicDescribeConcurrency = 16

// drainStep is what the scale-down does next with the node it is removing.
type drainStep int

const (
	// stepStart: the node is not draining yet; dry run, then decommission.
	stepStart drainStep = iota
	// stepWait: the node is draining; wait for it to own nothing and leave Raft.
	stepWait
	// stepDead: the node is dead and still holds something; nothing can move until it returns.
	stepDead
	// stepRemove: the node owns nothing and has left Raft (or is no member): shrink past it.
	stepRemove
)

// nextDrainStep is the scale-down gate for one node: the StatefulSet may only shrink past a
// node that owns no partition and is out of the Raft configuration, after a decommission
// (docs/kubernetes.md#in). found is false when the node is not in the members list
// (it never joined, or its record was collected): nothing of the cluster lives on it.
func nextDrainStep(m client.Member, found bool) (step drainStep, reason, message string) {
	switch {
	case !found:
		return stepRemove, "", fmt.Sprintf("%s is not a cluster member", m.ID)
	case m.Draining && m.OwnedPartitions == 0 && m.RaftRole == drainRoleNone:
		return stepRemove, "", fmt.Sprintf("%s owns no partition and has left Raft", m.ID)
	case m.Status == client.StatusDead:
		return stepDead, degradedNodeDead, fmt.Sprintf(
			"%s is dead (no heartbeat since %s) and still owns %d partitions (raft role %s); it is not removed until it returns",
			m.ID, heartbeatTime(m.LastHeartbeat), m.OwnedPartitions, m.RaftRole)
	case m.Draining:
		return stepWait, "", fmt.Sprintf("%s is draining: %d partitions left, raft role %s", m.ID, m.OwnedPartitions, m.RaftRole)
	default:
		return stepStart, "", ""
	}
}

// verdictGate turns a decommission dry run into the go-ahead for a real one.
func verdictGate(node string, v *client.DecommissionVerdict) (ok bool, reason, message string) {
	if v.Allowed {
		return true, "", ""
	}
	return false, degradedScaleDownRefused, refusalMessage(node, v.Reasons)
}

// refusalMessage names the node and the brokers' reason codes (docs/internals/http-api.md §2.16).
func refusalMessage(node string, reasons []string) string {
	codes := "no reason given"
	if len(reasons) > 0 {
		codes = strings.Join(reasons, ", ")
	}
	return fmt.Sprintf("the brokers refuse to decommission %s: %s", node, codes)
}

// refusalReasons extracts the reason codes of a 409 decommission refusal; ok is false for any
// other error.
func refusalReasons(err error) (reasons []string, ok bool) {
	var e *client.Error
	if errors.As(err, &e) && e.Status == 409 {
		return e.Reasons, true
	}
	return nil, false
}

func heartbeatTime(unix int64) string {
	if unix <= 0 {
		return "never"
	}
	return time.Unix(unix, 0).UTC().Format(time.RFC3339)
}

// ownedBytes sums size_bytes over the partitions node owns, describing every topic (at most
// topicDescribeConcurrency at once). A topic deleted meanwhile counts as nothing; any other failure
// fails the sum (the caller keeps its previous figure).
func ownedBytes(ctx context.Context, cl *client.Client, node string) (int64, error) {
	topics, err := cl.AllTopics(ctx)
	if err != nil {
		return 0, fmt.Errorf("list topics: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		total int64
		first error
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, topicDescribeConcurrency)
	for _, t := range topics {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			d, err := cl.GetTopic(ctx, t.Name, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case client.IsStatus(err, 404):
			case err != nil:
				if first == nil {
					first = fmt.Errorf("describe topic %s: %w", t.Name, err)
					cancel()
				}
			default:
				for _, p := range d.PartitionStats {
					if p.OwnerNode == node {
						total += p.SizeBytes
					}
				}
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return total, nil
}

// drainETA estimates when the drain ends from the progress made since it started: by bytes when
// the node held any, else by partitions. Nil when nothing moved yet (no rate to go by) or when
// nothing is left.
func drainETA(e naradv1.DrainingNodeStatus, now time.Time) *metav1.Time {
	if e.StartedAt == nil {
		return nil
	}
	elapsed := now.Sub(e.StartedAt.Time)
	if elapsed <= 0 {
		return nil
	}
	done, left := float64(e.BytesAtStart-e.BytesLeft), float64(e.BytesLeft)
	if e.BytesAtStart == 0 {
		done, left = float64(e.PartitionsAtStart-e.PartitionsLeft), float64(e.PartitionsLeft)
	}
	if done <= 0 || left <= 0 {
		return nil
	}
	remaining := time.Duration(left / done * float64(elapsed))
	eta := metav1.NewTime(now.Add(remaining).Truncate(time.Second))
	return &eta
}

// startEntry records a node whose decommission starts now.
func startEntry(m client.Member, bytes int64, now time.Time) naradv1.DrainingNodeStatus {
	t := metav1.NewTime(now.Truncate(time.Second))
	var blocked []string
	if len(m.DecommissionBlocked) > 0 {
		blocked = slices.Clone(m.DecommissionBlocked)
	}
	return naradv1.DrainingNodeStatus{
		NodeID:            m.ID,
		StartedAt:         &t,
		PartitionsAtStart: int32(m.OwnedPartitions),
		BytesAtStart:      bytes,
		PartitionsLeft:    int32(m.OwnedPartitions),
		BytesLeft:         bytes,
		BlockedReasons:    blocked,
	}
}

// removedEntry is a node past its drain: out of Raft and scaled away (its pod and claim may
// still be going).
func removedEntry(e naradv1.DrainingNodeStatus) naradv1.DrainingNodeStatus {
	e.PartitionsLeft, e.BytesLeft, e.ETA, e.BlockedReasons = 0, 0, nil, nil
	return e
}

// progressEntry refreshes a draining node's entry from its member record. bytes is called only
// when the owned partition count changed since the last refresh (a draining node takes no new
// produce, so its bytes only drop when a partition flips away); a failure keeps the old figure.
func progressEntry(e naradv1.DrainingNodeStatus, m client.Member, now time.Time, bytes func() (int64, error)) naradv1.DrainingNodeStatus {
	owned := int32(m.OwnedPartitions)
	switch {
	case owned == 0:
		e.BytesLeft = 0
	case owned != e.PartitionsLeft:
		if b, err := bytes(); err == nil {
			e.BytesLeft = b
		}
	}
	e.PartitionsLeft = owned
	if m.DecommissionBlocked != nil { // nil: leader unreachable, unknown; keep what we knew
		e.BlockedReasons = slices.Clone(m.DecommissionBlocked)
	}
	if len(e.BlockedReasons) == 0 {
		e.BlockedReasons = nil
	}
	e.ETA = drainETA(e, now)
	return e
}

// cancelStaying cancels the decommission of nodes that are to stay (ordinal below both the
// spec and the StatefulSet): the user raised replicas again mid-drain. A node already out of
// Raft cannot be cancelled (the brokers answer 409); it is left as is. It returns a requeue
// period when a cancel failed.
func (s *scaleRun) cancelStaying(ctx context.Context, spec int32) time.Duration {
	var requeue time.Duration
	for _, m := range s.obs.Members {
		o, ok := naming.Ordinal(s.nc, m.ID)
		if !ok || !m.Draining || m.RaftRole == drainRoleNone || o >= s.current || o >= spec {
			continue
		}
		cl, err := s.client(ctx)
		if err == nil {
			err = cl.CancelDecommission(ctx, m.ID)
		}
		if err != nil && !client.IsStatus(err, 404) {
			log.FromContext(ctx).Info("could not cancel the decommission of a node that stays", "node", m.ID, "error", err.Error())
			requeue = drainPoll
			continue
		}
		delete(s.entries, m.ID)
		m.Draining = false
		s.members[m.ID] = m
		s.event(corev1.EventTypeNormal, eventDecommissionCancelled, "ScaleUp",
			"cancelled the decommission of %s: spec.replicas is %d again", m.ID, spec)
		log.FromContext(ctx).Info("decommission cancelled", "node", m.ID, "replicas", spec)
	}
	return requeue
}

// refresh updates the entries of nodes still in the StatefulSet from their member records,
// adopts draining nodes the scale-down is removing but has no entry for (a restart between
// the decommission and the status write), and drops entries of nodes no longer draining.
func (s *scaleRun) refresh(ctx context.Context, spec int32) {
	bytesOf := func(id string) func() (int64, error) {
		return func() (int64, error) {
			cl, err := s.client(ctx)
			if err != nil {
				return 0, err
			}
			return ownedBytes(ctx, cl, id)
		}
	}
	for id, e := range s.entries {
		if o, _ := naming.Ordinal(s.nc, id); o >= s.current {
			continue
		}
		m, ok := s.members[id]
		switch {
		case !ok:
			// Not a member (any more): scaleDown removes it when its turn comes.
		case !m.Draining:
			delete(s.entries, id)
		default:
			s.entries[id] = progressEntry(e, m, s.now, bytesOf(id))
		}
	}
	for _, m := range s.obs.Members {
		o, ok := naming.Ordinal(s.nc, m.ID)
		if _, known := s.entries[m.ID]; known || !ok || !m.Draining || o >= s.current || o < spec {
			continue
		}
		var bytes int64
		if m.OwnedPartitions > 0 {
			if b, err := bytesOf(m.ID)(); err == nil {
				bytes = b
			}
		}
		s.entries[m.ID] = startEntry(m, bytes, s.now)
		log.FromContext(ctx).Info("resuming the decommission of a draining node", "node", m.ID)
	}
}
