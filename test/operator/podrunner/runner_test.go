package podrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/naming"
	"narad.dev/operator/rack"
	"narad.dev/operator/testsupport"
)

const adminPassword = "runner-test-admin-pw"

// startEnv starts an envtest API server for one test and stops it at cleanup.
func startEnv(t *testing.T) *rest.Config {
	t.Helper()
	assets, err := testsupport.EnvtestAssets()
	if err != nil {
		t.Fatalf("envtest assets: %v", err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop envtest: %v", err)
		}
	})
	return cfg
}

// contractStatefulSet is the StatefulSet the NaradCluster controller builds for nc, written by
// hand from the pod contract (common brief), with the Secret and ConfigMap it mounts.
func contractStatefulSet(nc *naradv1.NaradCluster, replicas int32, extraArgs []string) (*appsv1.StatefulSet, []ctrlclient.Object) {
	var members, join []string
	for i := range nc.Spec.InitialClusterSize {
		members = append(members, naming.NodeID(nc, i))
		join = append(join, naming.PodHost(nc, i)+":"+strconv.Itoa(naming.ClusterPort))
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: naming.GeneratedSecret(nc), Namespace: nc.Namespace},
		Data: map[string][]byte{naradv1.ClusterSecretKey: []byte("runner-test-cluster-secret"), naradv1.AdminPasswordKey: []byte(adminPassword)}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: naming.ConfigMap(nc), Namespace: nc.Namespace},
		Data: map[string]string{naming.ConfigFileName: "log-level: info\ntopic-default-partitions: 3\n"}}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(naming.HTTPPortName)}},
			PeriodSeconds: 1, FailureThreshold: 3}
	}
	grace := int64(30)
	labels := naming.Labels(nc)
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: naming.StatefulSet(nc), Namespace: nc.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			ServiceName:         naming.HeadlessService(nc),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: naming.Selector(nc)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					// The rack writer, as the operator adds it (the runner runs it in-process).
					InitContainers: []corev1.Container{{
						Name: rack.ContainerName, Image: "narad-operator:test",
						Command:      []string{"/manager", rack.Subcommand, "--file=" + rack.Path()},
						Env:          []corev1.EnvVar{fieldEnv(rack.NodeNameEnv, "spec.nodeName")},
						VolumeMounts: []corev1.VolumeMount{{Name: rack.VolumeName, MountPath: rack.MountPath}},
					}},
					Containers: []corev1.Container{{
						Name: naming.ContainerName, Image: "narad:test", Command: []string{"narad", "serve"}, Args: extraArgs,
						Ports: []corev1.ContainerPort{{Name: naming.HTTPPortName, ContainerPort: naming.HTTPPort},
							{Name: naming.ClusterPortName, ContainerPort: naming.ClusterPort}},
						Env: []corev1.EnvVar{
							fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
							{Name: "NARAD_NODE_ID", Value: "$(POD_NAME)"},
							{Name: "NARAD_HTTP_ADDR", Value: ":7942"}, {Name: "NARAD_CLUSTER_ADDR", Value: ":7943"},
							{Name: "NARAD_ADVERTISE_ADDR", Value: "$(POD_NAME)." + naming.HeadlessService(nc) + ".$(POD_NAMESPACE).svc:7943"},
							{Name: "NARAD_INITIAL_MEMBERS", Value: strings.Join(members, ",")},
							{Name: "NARAD_JOIN", Value: strings.Join(join, ",")},
							{Name: "NARAD_DATA_DIR", Value: naming.DataDir},
							{Name: "NARAD_CONFIG", Value: naming.ConfigMountPath + "/" + naming.ConfigFileName},
							{Name: "NARAD_CLUSTER_SECRET_FILE", Value: "/etc/narad/cluster-secret/cluster-secret"},
							{Name: "NARAD_ADMIN_PASSWORD_FILE", Value: "/etc/narad/admin-secret/admin-password"},
							{Name: "NARAD_RACK_FILE", Value: rack.Path()},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: naming.DataVolume, MountPath: naming.DataMountPath},
							{Name: "config", MountPath: naming.ConfigMountPath, ReadOnly: true},
							{Name: "cluster-secret", MountPath: "/etc/narad/cluster-secret", ReadOnly: true},
							{Name: "admin-secret", MountPath: "/etc/narad/admin-secret", ReadOnly: true},
							{Name: rack.VolumeName, MountPath: rack.MountPath, ReadOnly: true},
						},
						StartupProbe:   probe("/healthz"),
						LivenessProbe:  probe("/healthz"),
						ReadinessProbe: probe("/readyz"),
						Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
							Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}},
					}},
					Volumes: []corev1.Volume{
						{Name: rack.VolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: naming.ConfigMap(nc)}}}},
						{Name: "cluster-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: naming.ClusterSecret(nc), Items: []corev1.KeyToPath{{Key: naradv1.ClusterSecretKey, Path: "cluster-secret"}}}}},
						{Name: "admin-secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName: naming.AdminSecret(nc), Items: []corev1.KeyToPath{{Key: naradv1.AdminPasswordKey, Path: "admin-password"}}}}},
					},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: naming.DataVolume},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	return sts, []ctrlclient.Object{secret, cm}
}

// eventually polls cond every 200 ms until it returns nil or timeout passes, then fails with
// the last error and the runner's pod logs.
func eventually(t *testing.T, r *Runner, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range r.Pods() {
		t.Logf("--- log tail of %s ---\n%s", p, r.LogTail(p, 25))
	}
	t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
}

func TestRunnerPlaysStatefulSetAndKubelet(t *testing.T) {
	cfg := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := New(cfg, Options{Logf: t.Logf, Zone: "runner-zone"})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()
	defer func() {
		r.Stop()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	cl := r.cl

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "runner-"}}
	if err := cl.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "rt", Namespace: ns.Name},
		Spec: naradv1.NaradClusterSpec{Replicas: 3, InitialClusterSize: 3}}
	sts, deps := contractStatefulSet(nc, 3, []string{"--heartbeat-interval=1s", "--heartbeat-timeout=6s"})
	for _, o := range append(deps, sts) {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	key := types.NamespacedName{Namespace: ns.Name, Name: sts.Name}
	podKey := func(i int32) types.NamespacedName {
		return types.NamespacedName{Namespace: ns.Name, Name: naming.PodName(nc, i)}
	}
	adminClient := func(i int32) *client.Client {
		c, err := client.New("http://"+r.IP(ns.Name, sts.Name, i)+":"+strconv.Itoa(naming.HTTPPort),
			client.WithBasicAuth(naming.AdminUser, adminPassword), client.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	readyPods := func(n int32) func() error {
		return func() error {
			var s appsv1.StatefulSet
			if err := cl.Get(ctx, key, &s); err != nil {
				return err
			}
			if s.Status.ReadyReplicas != n || s.Status.Replicas != n || s.Status.ObservedGeneration != s.Generation {
				return fmt.Errorf("sts status %+v", s.Status)
			}
			for i := range n {
				var p corev1.Pod
				if err := cl.Get(ctx, podKey(i), &p); err != nil {
					return err
				}
				if !podReady(&p) || p.Status.PodIP != r.IP(ns.Name, sts.Name, i) || p.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("pod %s: phase %s ip %s ready %v", p.Name, p.Status.Phase, p.Status.PodIP, podReady(&p))
				}
			}
			return nil
		}
	}
	aliveMembers := func(n int) func() error {
		return func() error {
			ml, err := adminClient(0).ClusterMembers(ctx)
			if err != nil {
				return err
			}
			alive := 0
			for _, m := range ml.Members {
				if m.Status == client.StatusAlive {
					alive++
				}
			}
			if alive != n {
				return fmt.Errorf("%d alive members: %+v", alive, ml.Members)
			}
			return nil
		}
	}

	// Three real brokers become Ready through the readiness probe and form one cluster.
	eventually(t, r, 90*time.Second, "3 ready pods", readyPods(3))
	eventually(t, r, 30*time.Second, "3 alive members", aliveMembers(3))
	// The init container wrote the runner Node's zone, which each broker read (--rack-file).
	ml, err := adminClient(0).ClusterMembers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ml.Members {
		if m.Rack != "runner-zone" {
			t.Fatalf("member %s rack %q, want runner-zone (from the rack init container)", m.ID, m.Rack)
		}
	}
	var s0 appsv1.StatefulSet
	if err := cl.Get(ctx, key, &s0); err != nil {
		t.Fatal(err)
	}
	rev1 := s0.Status.UpdateRevision
	if rev1 != Revision(&s0) || s0.Status.CurrentRevision != rev1 || s0.Status.UpdatedReplicas != 3 {
		t.Fatalf("revisions: %+v", s0.Status)
	}
	for i := range int32(3) {
		pvc := naming.PVC(nc, i)
		var c corev1.PersistentVolumeClaim
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: pvc}, &c); err != nil {
			t.Fatalf("PVC %s: %v", pvc, err)
		}
		if c.Status.Phase != corev1.ClaimBound || r.ClaimDir(ns.Name, pvc) == "" {
			t.Fatalf("PVC %s: phase %s dir %q", pvc, c.Status.Phase, r.ClaimDir(ns.Name, pvc))
		}
	}

	// A topic is created and produced to through the mapped addresses.
	if _, err := adminClient(0).CreateTopic(ctx, client.CreateTopicRequest{Name: "orders", Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	const msgs = 12
	for i := range msgs {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		produce := func() error {
			return adminClient(int32(i%3)).Produce(ctx, "orders", body, client.ProduceOptions{Key: strconv.Itoa(i)})
		}
		eventually(t, r, 20*time.Second, "produce "+string(body), produce)
	}

	// A template change is a new update revision; deleting a pod restarts it on that revision,
	// with its data.
	dir1 := r.ClaimDir(ns.Name, naming.PVC(nc, 1))
	var old corev1.Pod
	if err := cl.Get(ctx, podKey(1), &old); err != nil {
		t.Fatal(err)
	}
	patch := ctrlclient.MergeFrom(s0.DeepCopy())
	s0.Spec.Template.Annotations = map[string]string{"narad.dev/config-hash": "v2"}
	if err := cl.Patch(ctx, &s0, patch); err != nil {
		t.Fatal(err)
	}
	var rev2 string
	eventually(t, r, 10*time.Second, "new update revision", func() error {
		var s appsv1.StatefulSet
		if err := cl.Get(ctx, key, &s); err != nil {
			return err
		}
		if s.Status.UpdateRevision == rev1 || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("status %+v", s.Status)
		}
		if s.Status.CurrentRevision != rev1 || s.Status.UpdatedReplicas != 0 || s.Status.CurrentReplicas != 3 {
			return fmt.Errorf("OnDelete: pods must stay on %s until deleted: %+v", rev1, s.Status)
		}
		rev2 = s.Status.UpdateRevision
		return nil
	})
	if err := cl.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 60*time.Second, "pod 1 recreated on the new revision", func() error {
		var p corev1.Pod
		if err := cl.Get(ctx, podKey(1), &p); err != nil {
			return err
		}
		if p.UID == old.UID || p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev2 || !podReady(&p) {
			return fmt.Errorf("pod 1 uid %s revision %s ready %v", p.UID, p.Labels[appsv1.ControllerRevisionHashLabelKey], podReady(&p))
		}
		return nil
	})
	if !strings.Contains(r.LogTail(naming.PodName(nc, 1), 2000), "pod terminated (exit status 0)") {
		t.Fatalf("pod 1 did not stop gracefully on SIGTERM:\n%s", r.Logs(naming.PodName(nc, 1)))
	}
	if d := r.ClaimDir(ns.Name, naming.PVC(nc, 1)); d != dir1 {
		t.Fatalf("pod 1 restarted on data dir %q, had %q", d, dir1)
	}
	eventually(t, r, 30*time.Second, "3 alive members after the restart", aliveMembers(3))
	// Every message is still there, including those of the partitions pod 1 owns: its data survived.
	got := map[string]bool{}
	eventually(t, r, 60*time.Second, "every message consumed", func() error {
		ms, err := adminClient(2).Consume(ctx, "orders", client.ConsumeOptions{Max: 10, Wait: time.Second})
		if err != nil {
			return err
		}
		for _, m := range ms {
			b, err := m.Bytes()
			if err != nil {
				return err
			}
			got[string(b)] = true
			if err := adminClient(2).Ack(ctx, "orders", m.ReceiptHandle); err != nil {
				return err
			}
		}
		if len(got) != msgs {
			return fmt.Errorf("%d of %d messages consumed", len(got), msgs)
		}
		return nil
	})

	// A crash (SIGKILL) is a container restart: restartCount goes up and the pod is Ready again.
	if err := r.Kill(ns.Name, naming.PodName(nc, 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 60*time.Second, "pod 2 restarted after a kill", func() error {
		var p corev1.Pod
		if err := cl.Get(ctx, podKey(2), &p); err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 1 || !podReady(&p) {
			return fmt.Errorf("pod 2 status %+v", p.Status.ContainerStatuses)
		}
		return nil
	})

	// A paused (SIGSTOP) process fails its readiness probe: the pod goes NotReady, and Ready
	// again once resumed.
	if err := r.Pause(ns.Name, naming.PodName(nc, 2)); err != nil {
		t.Fatal(err)
	}
	podReadyIs := func(want bool) func() error {
		return func() error {
			var p corev1.Pod
			if err := cl.Get(ctx, podKey(2), &p); err != nil {
				return err
			}
			if podReady(&p) != want {
				return fmt.Errorf("pod 2 ready %v, want %v", podReady(&p), want)
			}
			return nil
		}
	}
	eventually(t, r, 10*time.Second, "paused pod 2 not ready", podReadyIs(false))
	if err := r.Resume(ns.Name, naming.PodName(nc, 2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 10*time.Second, "resumed pod 2 ready", podReadyIs(true))

	// 3 → 4 adds pod 3, which joins the cluster.
	if err := cl.Get(ctx, key, &s0); err != nil {
		t.Fatal(err)
	}
	patch = ctrlclient.MergeFrom(s0.DeepCopy())
	four := int32(4)
	s0.Spec.Replicas = &four
	if err := cl.Patch(ctx, &s0, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 90*time.Second, "4 ready pods", readyPods(4))
	eventually(t, r, 30*time.Second, "4 alive members", aliveMembers(4))

	// 4 → 3 deletes pod 3 (gracefully); deleting its PVC then removes its data directory.
	pvc3 := naming.PVC(nc, 3)
	dir3 := r.ClaimDir(ns.Name, pvc3)
	if dir3 == "" {
		t.Fatal("no data dir for pod 3")
	}
	if err := cl.Get(ctx, key, &s0); err != nil {
		t.Fatal(err)
	}
	patch = ctrlclient.MergeFrom(s0.DeepCopy())
	three := int32(3)
	s0.Spec.Replicas = &three
	if err := cl.Patch(ctx, &s0, patch); err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: pvc3}}
	if err := cl.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 30*time.Second, "pod 3 and its PVC gone", func() error {
		var p corev1.Pod
		if err := cl.Get(ctx, podKey(3), &p); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod 3 still there (%v)", err)
		}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: pvc3}, claim); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PVC still there (%v), finalizers %v", err, claim.Finalizers)
		}
		if _, err := os.Stat(dir3); !os.IsNotExist(err) {
			return fmt.Errorf("data dir %s still there (%v)", dir3, err)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(dir1, "data")); err != nil {
		t.Fatalf("pod 1's data dir went with pod 3's: %v", err)
	}
	eventually(t, r, 10*time.Second, "sts status back to 3", readyPods(3))

	// A lost volume: the claim is deleted (held by its finalizer while the pod exists), the
	// process killed and the data removed; the pod cannot start until it is deleted, and then
	// comes back on a fresh claim and an empty data directory.
	pvc2 := naming.PVC(nc, 2)
	dir2 := r.ClaimDir(ns.Name, pvc2)
	var before corev1.PersistentVolumeClaim
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: pvc2}, &before); err != nil {
		t.Fatal(err)
	}
	if err := r.LoseVolume(ctx, ns.Name, naming.PodName(nc, 2), pvc2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir2); !os.IsNotExist(err) {
		t.Fatalf("data dir %s still there after the loss (%v)", dir2, err)
	}
	eventually(t, r, 10*time.Second, "pod 2 not ready without its volume", podReadyIs(false))
	var lost corev1.Pod
	if err := cl.Get(ctx, podKey(2), &lost); err != nil {
		t.Fatal(err)
	}
	// Consistently (several restart attempts): no start succeeds without the claim.
	for end := time.Now().Add(3 * r.opts.RestartBackoff); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var p corev1.Pod
		if err := cl.Get(ctx, podKey(2), &p); err != nil || p.UID != lost.UID || podReady(&p) {
			t.Fatalf("pod 2 after its volume was lost: uid %s ready %v (%v)", p.UID, podReady(&p), err)
		}
	}
	if err := cl.Delete(ctx, &lost); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 90*time.Second, "pod 2 back on a fresh claim", func() error {
		var p corev1.Pod
		if err := cl.Get(ctx, podKey(2), &p); err != nil {
			return err
		}
		var c corev1.PersistentVolumeClaim
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: pvc2}, &c); err != nil {
			return err
		}
		if p.UID == lost.UID || c.UID == before.UID || !podReady(&p) || r.ClaimDir(ns.Name, pvc2) == "" {
			return fmt.Errorf("pod 2 uid %s ready %v, claim uid %s", p.UID, podReady(&p), c.UID)
		}
		return nil
	})

	// Deleting the StatefulSet deletes its pods (the garbage collector's part) and stops their
	// processes; the claims stay, as with the real controller's default retention.
	if err := cl.Delete(ctx, &s0); err != nil {
		t.Fatal(err)
	}
	eventually(t, r, 30*time.Second, "pods and processes gone with the StatefulSet", func() error {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, ctrlclient.InNamespace(ns.Name)); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d pods left", len(pods.Items))
		}
		for i := range int32(3) {
			if n := r.Restarts(ns.Name, naming.PodName(nc, i)); n != -1 {
				return fmt.Errorf("pod %d still has a container (restarts %d)", i, n)
			}
		}
		return nil
	})
	if d := r.ClaimDir(ns.Name, naming.PVC(nc, 0)); d == "" {
		t.Fatal("pod 0's claim directory went with the StatefulSet")
	}
}
