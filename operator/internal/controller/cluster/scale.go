package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
)

// The scale-down lists pods and deletes claims: its RBAC is in ../rbac.go (pods and
// persistentvolumeclaims get;list;watch;delete).

// Requeue periods of the scale-down.
const (
	// drainPoll is how often a drain in progress (or a removed pod still going) is looked at.
	drainPoll = 2 * time.Second
	// unreachablePoll is the retry period while no broker answers during a scale-down.
	unreachablePoll = 5 * time.Second
)

// Reasons of the Degraded condition (exact strings; kubectl narad and the tests match them).
const (
	degradedAsExpected         = "AsExpected"
	degradedScaleDownRefused   = "ScaleDownRefused"   // the brokers refuse the next decommission
	degradedNodeDead           = "NodeDead"           // the node to remove is dead and holds data
	degradedBrokersUnreachable = "BrokersUnreachable" // no broker answered during a scale-down
)

// Reasons of the Draining condition.
const (
	drainingDecommissioning = "Decommissioning" // a node is draining through the brokers
	drainingRemovingPods    = "RemovingPods"    // drained nodes were scaled away; pods/claims going
	drainingNone            = "NotDraining"
)

// Event reasons of the scale-down.
const (
	eventDecommissionStarted   = "DecommissionStarted"
	eventDecommissionCancelled = "DecommissionCancelled"
	eventScaleDownRefused      = "ScaleDownRefused"
	eventNodeDead              = "NodeDead"
	eventNodeRemoved           = "NodeRemoved"
	eventPVCDeleted            = "PVCDeleted"
	eventPVCRetained           = "PVCRetained"
)

// scale decides the StatefulSet replica count to apply now, decommissioning nodes through the
// brokers before any pod goes (docs/kubernetes.md#in): the highest ordinal first, one
// at a time, dry run first; the StatefulSet shrinks past a node only once it owns nothing and
// has left Raft; its claim is deleted or kept once its pod is gone. It sets the Draining and
// Degraded conditions, st.Draining and st.ScalePreview, and nothing else of st.
//
// Every decision is derived from the brokers (obs), the StatefulSet and the previous
// st.Draining (falling back to nc.Status.Draining), never from memory, so an operator restart
// resumes where the last one stopped. sts is nil before the StatefulSet exists. On error the
// count returned is the current one (never a shrink).
func (r *Reconciler) scale(ctx context.Context, nc *naradv1.NaradCluster, sts *appsv1.StatefulSet, obs *observation, st *naradv1.NaradClusterStatus) (int32, time.Duration, error) {
	registerMetrics()
	s := newScaleRun(r, nc, sts, obs, st)
	replicas, requeue, err := s.decide(ctx)
	s.finish()
	r.preview(ctx, nc, s.current, st, s.client)
	return replicas, requeue, err
}

// scalingDown reports whether a decommission is under way: a node is draining or a drained
// node's pod and claim are still going. Rolling restarts wait for it (they must
// never overlap with a rolling restart of the draining pod). A refused scale-down is not under
// way and does not hold rolling updates.
// st is the status scale just built (nc's persisted status when st is nil).
func (r *Reconciler) scalingDown(nc *naradv1.NaradCluster, st *naradv1.NaradClusterStatus) bool {
	if st == nil {
		st = &nc.Status
	}
	return len(st.Draining) > 0
}

// scaleRun is one scale decision: the reconcile's inputs and the status parts it builds.
type scaleRun struct {
	r       *Reconciler
	nc      *naradv1.NaradCluster
	sts     *appsv1.StatefulSet
	obs     *observation
	st      *naradv1.NaradClusterStatus
	now     time.Time
	current int32 // StatefulSet replicas now (0 without one)

	entries  map[string]naradv1.DrainingNodeStatus // st.Draining being built, by node ID
	members  map[string]client.Member
	degraded *metav1.Condition // nil: AsExpected
	// removedNow is the node this run scales away (it is still below current until applied).
	removedNow map[string]bool

	cl    *client.Client
	clErr error
	clSet bool
}

func newScaleRun(r *Reconciler, nc *naradv1.NaradCluster, sts *appsv1.StatefulSet, obs *observation, st *naradv1.NaradClusterStatus) *scaleRun {
	s := &scaleRun{r: r, nc: nc, sts: sts, obs: obs, st: st, now: r.scaleNow(),
		entries: map[string]naradv1.DrainingNodeStatus{}, removedNow: map[string]bool{}}
	if sts != nil {
		s.current = 1
		if sts.Spec.Replicas != nil {
			s.current = *sts.Spec.Replicas
		}
	}
	prev := st.Draining
	if prev == nil {
		prev = nc.Status.Draining
	}
	for _, e := range prev {
		if _, ok := naming.Ordinal(nc, e.NodeID); ok {
			s.entries[e.NodeID] = *e.DeepCopy()
		}
	}
	if obs != nil && obs.Err == nil && obs.Members != nil {
		s.members = make(map[string]client.Member, len(obs.Members))
		for _, m := range obs.Members {
			s.members[m.ID] = m
		}
	}
	return s
}

func (r *Reconciler) scaleNow() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// decide returns the replica count and requeue period, recording what it did in s.
func (s *scaleRun) decide(ctx context.Context) (int32, time.Duration, error) {
	spec := s.nc.Spec.Replicas
	if s.sts == nil {
		clear(s.entries)
		return spec, 0, nil
	}
	pending, err := s.finishRemoved(ctx)
	if err != nil {
		return s.current, 0, err
	}
	if s.members == nil {
		if spec < s.current || s.hasActive() {
			s.setDegraded(degradedBrokersUnreachable, "no broker answered: "+unreachableText(s.obs))
			return s.current, unreachablePoll, nil
		}
		if pending > 0 {
			return s.current, drainPoll, nil
		}
		return spec, 0, nil
	}
	requeue := s.cancelStaying(ctx, spec)
	s.refresh(ctx, spec)
	if spec >= s.current {
		// Scale up. A drained node still leaving holds the growth: a pod that came back over its
		// ordinal before the old one went would keep it, out of Raft, forever.
		if pending > 0 {
			return s.current, drainPoll, nil
		}
		top := naming.NodeID(s.nc, s.current-1)
		_, draining := s.entries[top]
		if m, ok := s.members[top]; ok && draining && s.current > 0 && m.Draining && m.RaftRole == drainRoleNone && m.OwnedPartitions == 0 {
			// Raised mid-drain after the brokers had already removed the node: finish the removal,
			// then grow back (the new pod joins again and its drain flag is cancelled above).
			// Without an entry the removal is over and the record is the brokers' leftover of
			// it (kept until their member GC): the pod over that ordinal is the new one.
			return s.remove(ctx, m, true), drainPoll, nil
		}
		return spec, requeue, nil
	}
	return s.scaleDown(ctx)
}

// scaleDown takes the highest ordinal one step further towards removal.
func (s *scaleRun) scaleDown(ctx context.Context) (int32, time.Duration, error) {
	id := naming.NodeID(s.nc, s.current-1)
	m, found := s.members[id]
	if !found {
		m = client.Member{ID: id}
	}
	step, reason, msg := nextDrainStep(m, found)
	switch step {
	case stepRemove:
		return s.remove(ctx, m, found), drainPoll, nil
	case stepDead:
		s.setDegraded(reason, msg)
		s.eventOncePerGeneration(reason, corev1.EventTypeWarning, eventNodeDead, "Decommission", msg)
		return s.current, 0, nil
	case stepWait:
		return s.current, drainPoll, nil
	}
	cl, err := s.client(ctx)
	if err != nil {
		s.setDegraded(degradedBrokersUnreachable, err.Error())
		return s.current, unreachablePoll, nil
	}
	v, err := cl.Decommission(ctx, id, true)
	if err != nil {
		s.setDegraded(degradedBrokersUnreachable, fmt.Sprintf("decommission dry run of %s: %v", id, err))
		return s.current, unreachablePoll, nil
	}
	if ok, reason, msg := verdictGate(id, v); !ok {
		s.refuse(reason, msg)
		return s.current, 0, nil
	}
	// The bytes at start are best effort: without them the ETA goes by partitions.
	bytes, err := ownedBytes(ctx, cl, id)
	if err != nil {
		log.FromContext(ctx).Info("could not sum the bytes of a node about to drain", "node", id, "error", err.Error())
		bytes = 0
	}
	if _, err := cl.Decommission(ctx, id, false); err != nil {
		if reasons, refused := refusalReasons(err); refused {
			s.refuse(degradedScaleDownRefused, refusalMessage(id, reasons))
			return s.current, 0, nil
		}
		s.setDegraded(degradedBrokersUnreachable, fmt.Sprintf("decommission of %s: %v", id, err))
		return s.current, unreachablePoll, nil
	}
	s.entries[id] = startEntry(m, bytes, s.now)
	s.event(corev1.EventTypeNormal, eventDecommissionStarted, "Decommission",
		"decommissioning %s (%d partitions, %d bytes) to scale to %d replicas", id, m.OwnedPartitions, bytes, s.nc.Spec.Replicas)
	decommissions.WithLabelValues(s.nc.Namespace, s.nc.Name, resultStarted).Inc()
	log.FromContext(ctx).Info("decommission started", "node", id, "partitions", m.OwnedPartitions, "bytes", bytes)
	return s.current, drainPoll, nil
}

// remove shrinks the StatefulSet past the highest ordinal, whose node owns nothing and is out of
// Raft. Its entry stays until the pod is gone and the claim dealt with (finishRemoved).
func (s *scaleRun) remove(ctx context.Context, m client.Member, member bool) int32 {
	e, ok := s.entries[m.ID]
	if !ok {
		e = startEntry(client.Member{ID: m.ID}, 0, s.now)
	}
	s.entries[m.ID] = removedEntry(e)
	s.removedNow[m.ID] = true
	if s.shrunkBefore(m.ID) {
		return s.current - 1 // the StatefulSet read lags our last write: said and counted already
	}
	how := "left Raft and owns no partition"
	if !member {
		how = "is not a cluster member"
	}
	s.event(corev1.EventTypeNormal, eventNodeRemoved, "ScaleDown", "%s %s; scaling the StatefulSet to %d", m.ID, how, s.current-1)
	decommissions.WithLabelValues(s.nc.Namespace, s.nc.Name, resultCompleted).Inc()
	log.FromContext(ctx).Info("node removed, shrinking the StatefulSet", "node", m.ID, "replicas", s.current-1)
	return s.current - 1
}

// shrunkBefore reports whether the last reconcile already scaled the StatefulSet past node id
// (the count it applied, status.replicas, is at most the node's ordinal, and the node's entry
// was kept): a StatefulSet read from a lagging cache shows it again.
func (s *scaleRun) shrunkBefore(id string) bool {
	o, _ := naming.Ordinal(s.nc, id)
	if s.nc.Status.Replicas == 0 || s.nc.Status.Replicas > o {
		return false
	}
	return slices.ContainsFunc(s.nc.Status.Draining, func(e naradv1.DrainingNodeStatus) bool { return e.NodeID == id })
}

// finishRemoved deals with the claims of nodes scaled away (ordinals ≥ current) once their pods
// are gone, per spec.storage.pvcRetentionOnScaleDown, and drops their entries. It returns how
// many are still waiting for their pod.
func (s *scaleRun) finishRemoved(ctx context.Context) (pending int, err error) {
	var gone []string
	for id := range s.entries {
		if o, _ := naming.Ordinal(s.nc, id); o >= s.current {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	var pods corev1.PodList
	if err := s.r.Client.List(ctx, &pods, ctrlclient.InNamespace(s.nc.Namespace),
		ctrlclient.MatchingLabels(naming.Selector(s.nc))); err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	running := map[string]bool{}
	for _, p := range pods.Items {
		running[p.Name] = true
	}
	slices.Sort(gone)
	for _, id := range gone {
		o, _ := naming.Ordinal(s.nc, id)
		if running[naming.PodName(s.nc, o)] {
			pending++
			continue
		}
		claim := naming.PVC(s.nc, o)
		if s.nc.Spec.Storage.PVCRetentionOnScaleDown == naradv1.PVCRetentionDelete {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.nc.Namespace, Name: claim}}
			switch err := s.r.Client.Delete(ctx, pvc); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return pending, fmt.Errorf("delete claim %s of removed node %s: %w", claim, id, err)
			default:
				s.event(corev1.EventTypeNormal, eventPVCDeleted, "ScaleDown", "deleted claim %s of removed node %s", claim, id)
			}
		} else {
			// Empty counts as Retain, the API's default: a claim is never deleted unasked.
			s.event(corev1.EventTypeNormal, eventPVCRetained, "ScaleDown", "kept claim %s of removed node %s (pvcRetentionOnScaleDown Retain)", claim, id)
		}
		delete(s.entries, id)
	}
	return pending, nil
}

// hasActive reports whether a node is draining (has an entry and is still in the StatefulSet).
func (s *scaleRun) hasActive() bool {
	for id := range s.entries {
		if o, _ := naming.Ordinal(s.nc, id); o < s.current {
			return true
		}
	}
	return false
}

// refuse records a refused scale-down: Degraded, and an event and a count once per generation.
func (s *scaleRun) refuse(reason, msg string) {
	s.setDegraded(reason, msg)
	if s.eventOncePerGeneration(reason, corev1.EventTypeWarning, eventScaleDownRefused, "Decommission", msg) {
		decommissions.WithLabelValues(s.nc.Namespace, s.nc.Name, resultRefused).Inc()
	}
}

func (s *scaleRun) setDegraded(reason, msg string) {
	s.degraded = &metav1.Condition{Type: naradv1.ConditionDegraded, Status: metav1.ConditionTrue,
		Reason: reason, Message: msg, ObservedGeneration: s.nc.Generation, LastTransitionTime: metav1.NewTime(s.now)}
}

// eventOncePerGeneration emits the event unless the last status already showed Degraded with
// this reason for this generation (the persisted status survives restarts; memory does not).
func (s *scaleRun) eventOncePerGeneration(degradedReason, eventType, reason, action, msg string) bool {
	for _, conds := range [][]metav1.Condition{s.nc.Status.Conditions, s.st.Conditions} {
		c := meta.FindStatusCondition(conds, naradv1.ConditionDegraded)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == degradedReason && c.ObservedGeneration == s.nc.Generation {
			return false
		}
	}
	s.event(eventType, reason, action, "%s", msg)
	return true
}

func (s *scaleRun) event(eventType, reason, action, note string, args ...any) {
	if s.r.Recorder != nil {
		s.r.Recorder.Eventf(s.nc, nil, eventType, reason, action, note, args...)
	}
}

// client connects lazily, once per scale run, to a ready broker: the leader first, then the
// ordinals in order.
func (s *scaleRun) client(ctx context.Context) (*client.Client, error) {
	if s.clSet {
		return s.cl, s.clErr
	}
	s.clSet = true
	if s.r.Brokers == nil {
		s.clErr = fmt.Errorf("no broker connector configured")
		return nil, s.clErr
	}
	var ordinals []int32
	if s.obs != nil {
		if o, ok := naming.Ordinal(s.nc, s.obs.Leader); ok && o < s.current {
			ordinals = append(ordinals, o)
		}
	}
	for o := int32(0); o < s.current; o++ {
		if len(ordinals) == 0 || ordinals[0] != o {
			ordinals = append(ordinals, o)
		}
	}
	s.cl, _, s.clErr = s.r.Brokers.Any(ctx, s.nc, ordinals)
	return s.cl, s.clErr
}

// finish writes the Draining and Degraded conditions, st.Draining and the draining gauge.
func (s *scaleRun) finish() {
	gen := s.nc.Generation
	st := s.st
	st.Draining = nil
	var active, leaving []string
	for _, e := range s.entries {
		st.Draining = append(st.Draining, e)
	}
	slices.SortFunc(st.Draining, func(a, b naradv1.DrainingNodeStatus) int {
		oa, _ := naming.Ordinal(s.nc, a.NodeID)
		ob, _ := naming.Ordinal(s.nc, b.NodeID)
		return cmp.Compare(ob, oa) // highest ordinal first: the drain order
	})
	for _, e := range st.Draining {
		if o, _ := naming.Ordinal(s.nc, e.NodeID); o < s.current && !s.removedNow[e.NodeID] {
			active = append(active, fmt.Sprintf("%s (%d/%d partitions, %d bytes left%s)",
				e.NodeID, e.PartitionsLeft, e.PartitionsAtStart, e.BytesLeft, blockedSuffix(e.BlockedReasons)))
		} else {
			leaving = append(leaving, e.NodeID)
		}
	}
	drain := metav1.Condition{Type: naradv1.ConditionDraining, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(s.now)}
	switch {
	case len(active) > 0:
		drain.Status, drain.Reason = metav1.ConditionTrue, drainingDecommissioning
		drain.Message = "draining " + strings.Join(active, "; ")
	case len(leaving) > 0:
		drain.Status, drain.Reason = metav1.ConditionTrue, drainingRemovingPods
		drain.Message = "drained and scaled away, pod or claim still going: " + strings.Join(leaving, ", ")
	default:
		drain.Status, drain.Reason, drain.Message = metav1.ConditionFalse, drainingNone, "no node is decommissioning"
	}
	meta.SetStatusCondition(&st.Conditions, drain)
	deg := metav1.Condition{Type: naradv1.ConditionDegraded, Status: metav1.ConditionFalse,
		Reason: degradedAsExpected, Message: "no scale-down is blocked", ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(s.now)}
	if s.degraded != nil {
		deg = *s.degraded
	}
	meta.SetStatusCondition(&st.Conditions, deg)
	drainingNodes.WithLabelValues(s.nc.Namespace, s.nc.Name).Set(float64(len(active)))
}

func blockedSuffix(reasons []string) string {
	if len(reasons) == 0 {
		return ""
	}
	return ", blocked: " + strings.Join(reasons, ", ")
}

func unreachableText(obs *observation) string {
	if obs == nil || obs.Err == nil {
		return "no members reported"
	}
	return obs.Err.Error()
}
