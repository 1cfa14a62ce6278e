package podrunner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels the StatefulSet controller puts on its pods.
const (
	LabelPodName  = appsv1.StatefulSetPodNameLabel // statefulset.kubernetes.io/pod-name
	LabelPodIndex = appsv1.PodIndexLabel           // apps.kubernetes.io/pod-index
)

// Revision is the update revision of a StatefulSet: "<name>-<hash of spec.template>". It is
// stable (the hash of the template's JSON) and changes with any change of the template; a pod's
// controller-revision-hash label holds the revision it was created from.
func Revision(s *appsv1.StatefulSet) string {
	b, err := json.Marshal(s.Spec.Template)
	if err != nil {
		panic(err) // a PodTemplateSpec always marshals
	}
	sum := sha256.Sum256(b)
	return s.Name + "-" + hex.EncodeToString(sum[:])[:10]
}

// syncSet brings the pods of one StatefulSet in line with its spec and writes its status:
// ordinals ≥ replicas are deleted (highest first), missing ordinals < replicas are created
// with their PVCs (all at once, whatever the pod management policy), from the current
// template (update revision).
func (r *Runner) syncSet(ctx context.Context, s *appsv1.StatefulSet, pods []*corev1.Pod) error {
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	rev := Revision(s)
	byOrdinal := map[int32]*corev1.Pod{}
	for _, p := range pods {
		name, ord, ok := splitOrdinal(p.Name)
		if ok && name == s.Name {
			byOrdinal[ord] = p
		}
	}
	var errs []error
	var extra []int32
	for ord := range byOrdinal {
		if ord >= replicas && byOrdinal[ord].DeletionTimestamp == nil {
			extra = append(extra, ord)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] > extra[j] })
	for _, ord := range extra {
		p := byOrdinal[ord]
		r.logf("statefulset %s/%s: scale-down deletes pod %s", s.Namespace, s.Name, p.Name)
		errs = append(errs, ignoreNotFound(r.cl.Delete(ctx, p, ctrlclient.Preconditions{UID: &p.UID})))
	}
	for ord := range replicas {
		if _, ok := byOrdinal[ord]; ok {
			continue
		}
		if err := r.createPod(ctx, s, ord, rev); err != nil {
			errs = append(errs, fmt.Errorf("ordinal %d: %w", ord, err))
		}
	}
	errs = append(errs, r.writeSetStatus(ctx, s, pods, rev))
	return errors.Join(errs...)
}

// createPod creates ordinal ord's PVCs (when missing) and pod, and starts its container.
func (r *Runner) createPod(ctx context.Context, s *appsv1.StatefulSet, ord int32, rev string) error {
	name := s.Name + "-" + strconv.Itoa(int(ord))
	for _, t := range s.Spec.VolumeClaimTemplates {
		ready, err := r.ensureClaim(ctx, s, t, name)
		if err != nil {
			return err
		}
		if !ready {
			return nil // the old claim is still being deleted; try again next pass
		}
	}
	pod := newPod(s, name, ord, rev)
	if err := r.cl.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	r.logf("statefulset %s/%s: created pod %s (revision %s)", s.Namespace, s.Name, name, rev)
	r.startContainer(ctx, pod)
	return nil
}

// newPod builds pod ordinal ord of s from its template, like the StatefulSet controller.
func newPod(s *appsv1.StatefulSet, name string, ord int32, rev string) *corev1.Pod {
	t := s.Spec.Template.DeepCopy()
	labels := map[string]string{}
	for k, v := range t.Labels {
		labels[k] = v
	}
	labels[appsv1.ControllerRevisionHashLabelKey] = rev
	labels[LabelPodName] = name
	labels[LabelPodIndex] = strconv.Itoa(int(ord))
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace, Labels: labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: s.UID,
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: t.Spec,
	}
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = s.Spec.ServiceName
	pod.Spec.NodeName = NodeName
	for _, ct := range s.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: ct.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ct.Name + "-" + name},
		}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == ct.Name {
				pod.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, v)
		}
	}
	return pod
}

// writeSetStatus computes the status like the StatefulSet controller: replicas counts every
// pod, ready ones are running with Ready True, current/updated ones are not terminating and
// carry that revision. currentRevision moves to the update revision once every pod is on it.
func (r *Runner) writeSetStatus(ctx context.Context, s *appsv1.StatefulSet, pods []*corev1.Pod, rev string) error {
	cur := s.Status.CurrentRevision
	if cur == "" {
		cur = rev
	}
	var st appsv1.StatefulSetStatus
	for _, p := range pods {
		st.Replicas++
		if p.Status.Phase == corev1.PodRunning && podReady(p) && p.DeletionTimestamp == nil {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
		if p.DeletionTimestamp == nil {
			switch p.Labels[appsv1.ControllerRevisionHashLabelKey] {
			case rev:
				st.UpdatedReplicas++
				if cur == rev {
					st.CurrentReplicas++
				}
			case cur:
				st.CurrentReplicas++
			}
		}
	}
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	if cur != rev && st.UpdatedReplicas == replicas && st.Replicas == replicas {
		cur, st.CurrentReplicas = rev, st.UpdatedReplicas
	}
	st.CurrentRevision, st.UpdateRevision, st.ObservedGeneration = cur, rev, s.Generation
	old := s.Status
	if old.Replicas == st.Replicas && old.ReadyReplicas == st.ReadyReplicas && old.AvailableReplicas == st.AvailableReplicas &&
		old.CurrentReplicas == st.CurrentReplicas && old.UpdatedReplicas == st.UpdatedReplicas &&
		old.CurrentRevision == st.CurrentRevision && old.UpdateRevision == st.UpdateRevision &&
		old.ObservedGeneration == st.ObservedGeneration {
		return nil
	}
	// Explicit zeros: a merge patch built from the struct would drop them (omitempty).
	body, err := json.Marshal(map[string]any{"status": map[string]any{
		"replicas": st.Replicas, "readyReplicas": st.ReadyReplicas, "availableReplicas": st.AvailableReplicas,
		"currentReplicas": st.CurrentReplicas, "updatedReplicas": st.UpdatedReplicas,
		"currentRevision": st.CurrentRevision, "updateRevision": st.UpdateRevision,
		"observedGeneration": st.ObservedGeneration,
	}})
	if err != nil {
		return err
	}
	obj := &appsv1.StatefulSet{}
	obj.Namespace, obj.Name = s.Namespace, s.Name
	return ignoreNotFound(r.cl.Status().Patch(ctx, obj, ctrlclient.RawPatch(types.MergePatchType, body)))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
