package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fullValues sets every value the chart has away from its default.
const fullValues = `
image: {repository: registry.example/narad-operator, tag: v9.8.7, pullPolicy: Always}
imagePullSecrets: [{name: pull}]
brokerImage: registry.example/narad:v1.2.3
replicaCount: 2
leaderElection: true
watchNamespace: queues
statusInterval: 15s
resyncPeriod: 2m
brokerTimeout: 4s
logLevel: debug
extraArgs: ["--zap-encoder=console"]
fullnameOverride: narad-op
serviceAccount: {create: true, name: narad-op-sa, annotations: {example.com/role: operator}}
podAnnotations: {example.com/scrape: "yes"}
podLabels: {team: queues}
priorityClassName: system-cluster-critical
resources: {requests: {cpu: 50m, memory: 100Mi}, limits: {cpu: "1", memory: 512Mi}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: operators, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]
healthProbe: {port: 9440}
metrics: {enabled: true, port: 9443, service: {type: ClusterIP, port: 8443, annotations: {example.com/a: b}}}
serviceMonitor: {enabled: true, labels: {release: prometheus}, interval: 15s, scrapeTimeout: 5s}
prometheusRule: {enabled: true, labels: {release: prometheus}}
grafanaDashboard: {enabled: true, namespace: narad-system, labels: {team: queues}, annotations: {grafana_folder: Narad}}
`

func TestChartLintsWithoutWarnings(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]string{"defaults": "", "every value set": fullValues} {
		t.Run(name, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = releaseNamespace
			lint.KubeVersion = kv
			res := lint.Run([]string{chartDir(t)}, values(t, vals))
			for _, err := range res.Errors {
				t.Errorf("lint error: %v", err)
			}
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
		})
	}
}

func TestDefaultRenderHasTheOperatorAndNoServiceMonitor(t *testing.T) {
	objs := render(t, "")
	// ClusterRoles: the manager's, the brokers' rack role, the aggregated view and edit roles.
	want := map[string]int{"Deployment": 1, "ServiceAccount": 1, "ClusterRole": 4, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Service": 1}
	got := map[string]int{}
	for _, o := range objs {
		got[o.GetKind()]++
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rendered kinds = %v, want %v", got, want)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			if o.GetNamespace() != "" {
				t.Errorf("%s %s is cluster-scoped but has namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
			}
		default:
			if o.GetNamespace() != releaseNamespace {
				t.Errorf("%s %s namespace = %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), releaseNamespace)
			}
		}
		if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s %s labels = %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
	}
	checkWiring(t, objs)

	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "ghcr.io/narad-dev/narad-operator:"+loadChart(t).Metadata.AppVersion {
		t.Errorf("default image = %q, want the appVersion tag", c.Image)
	}
	wantArgs := []string{"--leader-elect=true", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
		"--status-interval=30s", "--resync-period=1m", "--broker-timeout=10s",
		"--rack-cluster-role=narad-operator-broker-rack", "--zap-log-level=info"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("default args = %q, want %q", c.Args, wantArgs)
	}
	sc := dep.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.SecurityContext == nil ||
		c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the manager must run as non-root with a read-only root: pod %+v container %+v", sc, c.SecurityContext)
	}
}

// checkWiring proves the objects point at each other: the Deployment runs as the ServiceAccount
// the bindings bind, the bindings name rendered roles of their namespace, the rack role the
// manager is told about is rendered, and the metrics Service selects the Deployment's pods on a
// port the container declares.
func checkWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	sa := only(t, objs, "ServiceAccount")
	if dep.Spec.Template.Spec.ServiceAccountName != sa.GetName() {
		t.Errorf("Deployment runs as %q, the chart creates ServiceAccount %q",
			dep.Spec.Template.Spec.ServiceAccountName, sa.GetName())
	}
	crb := typed[rbacv1.ClusterRoleBinding](t, only(t, objs, "ClusterRoleBinding"))
	if crb.RoleRef.Kind != "ClusterRole" || named(objs, "ClusterRole", "", crb.RoleRef.Name) == nil {
		t.Errorf("ClusterRoleBinding roleRef = %+v names no rendered ClusterRole", crb.RoleRef)
	}
	subjects := [][]rbacv1.Subject{crb.Subjects}
	for _, o := range ofKind(objs, "RoleBinding") {
		rb := typed[rbacv1.RoleBinding](t, o)
		if rb.RoleRef.Kind != "Role" || named(objs, "Role", rb.Namespace, rb.RoleRef.Name) == nil {
			t.Errorf("RoleBinding %s/%s roleRef = %+v names no Role of its namespace", rb.Namespace, rb.Name, rb.RoleRef)
		}
		subjects = append(subjects, rb.Subjects)
	}
	for _, subjects := range subjects {
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.GetName(), Namespace: releaseNamespace}}
		if !reflect.DeepEqual(subjects, want) {
			t.Errorf("binding subjects = %+v, want %+v", subjects, want)
		}
	}
	rack := ""
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--rack-cluster-role="); ok {
			rack = v
		}
	}
	if rack == "" || named(objs, "ClusterRole", "", rack) == nil {
		t.Errorf("--rack-cluster-role=%q names no rendered ClusterRole", rack)
	}
	role := typed[rbacv1.Role](t, leaderElectionRole(t, objs))
	leases := false
	for _, r := range role.Rules {
		leases = leases || (slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
			slices.Contains(r.Verbs, "update"))
	}
	if !leases {
		t.Errorf("the leader-election Role cannot update leases: %+v", role.Rules)
	}

	svc := typed[corev1.Service](t, only(t, objs, "Service"))
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selects %s=%s, the pods have %v", k, v, dep.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("metrics Service has no selector")
	}
	ports := map[string]bool{}
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	for _, p := range svc.Spec.Ports {
		if !ports[p.TargetPort.String()] {
			t.Errorf("metrics Service targets port %q, the container has %v", p.TargetPort.String(), ports)
		}
	}
}

func TestServiceMonitorOnlyWhenEnabled(t *testing.T) {
	objs := render(t, "serviceMonitor: {enabled: true, labels: {release: prom}, interval: 20s}")
	sm := only(t, objs, "ServiceMonitor")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != releaseNamespace {
		t.Errorf("ServiceMonitor %s in %q", sm.GetAPIVersion(), sm.GetNamespace())
	}
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels = %v, want release=prom", sm.GetLabels())
	}
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	svc := only(t, objs, "Service")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, the metrics Service has %v", k, v, svc.GetLabels())
		}
	}
	if len(selector) == 0 {
		t.Error("ServiceMonitor selects nothing")
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints = %v", endpoints)
	}
	ep := endpoints[0].(map[string]interface{})
	if ep["port"] != "metrics" || ep["interval"] != "20s" || ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoint = %v", ep)
	}

	if n := len(ofKind(render(t, "serviceMonitor: {enabled: false}"), "ServiceMonitor")); n != 0 {
		t.Errorf("serviceMonitor.enabled=false rendered %d ServiceMonitors", n)
	}
}

func TestValuesFlowIntoTheDeployment(t *testing.T) {
	objs := render(t, fullValues)
	checkWiring(t, objs)
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	if dep.Name != "narad-op" || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment %s replicas %d", dep.Name, *dep.Spec.Replicas)
	}
	pod := dep.Spec.Template
	c := pod.Spec.Containers[0]
	if c.Image != "registry.example/narad-operator:v9.8.7" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %q pull %q", c.Image, c.ImagePullPolicy)
	}
	wantArgs := []string{"--leader-elect=true", "--metrics-bind-address=:9443", "--health-probe-bind-address=:9440",
		"--broker-image=registry.example/narad:v1.2.3", "--status-interval=15s", "--resync-period=2m",
		"--broker-timeout=4s", "--watch-namespace=queues", "--rack-cluster-role=narad-op-broker-rack",
		"--zap-log-level=debug", "--zap-encoder=console"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 9443 || ports["probes"] != 9440 {
		t.Errorf("container ports = %v", ports)
	}
	if pod.Spec.ServiceAccountName != "narad-op-sa" || pod.Spec.PriorityClassName != "system-cluster-critical" ||
		!reflect.DeepEqual(pod.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull"}}) {
		t.Errorf("pod spec sa=%q priority=%q pullSecrets=%v", pod.Spec.ServiceAccountName,
			pod.Spec.PriorityClassName, pod.Spec.ImagePullSecrets)
	}
	if pod.Labels["team"] != "queues" || pod.Annotations["example.com/scrape"] != "yes" {
		t.Errorf("pod labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if pod.Spec.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Spec.Tolerations) != 1 ||
		pod.Spec.Tolerations[0].Key != "dedicated" || pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		t.Errorf("scheduling: nodeSelector %v tolerations %v affinity %v", pod.Spec.NodeSelector,
			pod.Spec.Tolerations, pod.Spec.Affinity)
	}
	if !c.Resources.Limits.Memory().Equal(resource.MustParse("512Mi")) ||
		!c.Resources.Requests.Cpu().Equal(resource.MustParse("50m")) {
		t.Errorf("resources = %+v", c.Resources)
	}
	sa := only(t, objs, "ServiceAccount")
	if sa.GetName() != "narad-op-sa" || sa.GetAnnotations()["example.com/role"] != "operator" {
		t.Errorf("ServiceAccount %s annotations %v", sa.GetName(), sa.GetAnnotations())
	}
	svc := typed[corev1.Service](t, only(t, objs, "Service"))
	if svc.Spec.Ports[0].Port != 8443 || svc.Annotations["example.com/a"] != "b" {
		t.Errorf("metrics Service ports %+v annotations %v", svc.Spec.Ports, svc.Annotations)
	}
}

func TestSwitchesRemoveWhatTheyGuard(t *testing.T) {
	objs := render(t, "rbac: {create: false}\nserviceAccount: {create: false, name: existing}\nmetrics: {enabled: false}")
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service"} {
		if n := len(ofKind(objs, kind)); n != 0 {
			t.Errorf("%d %s rendered with its switch off", n, kind)
		}
	}
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	if dep.Spec.Template.Spec.ServiceAccountName != "existing" {
		t.Errorf("serviceAccountName = %q, want existing", dep.Spec.Template.Spec.ServiceAccountName)
	}
	if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--metrics-bind-address=0") {
		t.Errorf("metrics.enabled=false args = %q", dep.Spec.Template.Spec.Containers[0].Args)
	}
}

func TestContradictoryOrMistypedValuesAreRefused(t *testing.T) {
	for vals, want := range map[string]string{
		"replicaCount: 3\nleaderElection: false":                     "needs leaderElection",
		"serviceMonitor: {enabled: true}\nmetrics: {enabled: false}": "needs metrics.enabled",
		// values.schema.json: a misspelt key, a wrong type, a malformed duration, a bad enum.
		"replicas: 2":                    "replicas",
		"replicaCount: two":              "replicaCount",
		"statusInterval: 30 seconds":     "statusInterval",
		"image: {pullPolicy: Sometimes}": "pullPolicy",
	} {
		_, err := renderErr(t, vals)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %q: err = %v, want %q", vals, err, want)
		}
	}
}

// TestRenderedArgsParseWithTheManagersFlags runs the real manager binary's flag parser on the
// args the chart renders (followed by --help, so it prints its usage and exits 0 instead of
// starting): a flag the manager does not define makes it exit non-zero.
func TestRenderedArgsParseWithTheManagersFlags(t *testing.T) {
	bin := managerBinary(t)
	run := func(args []string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(bin, append(slices.Clone(args), "--help")...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	for name, vals := range map[string]string{
		"defaults":        "",
		"every value set": fullValues,
		"metrics off":     "metrics: {enabled: false}\nleaderElection: false",
	} {
		dep := typed[appsv1.Deployment](t, only(t, render(t, vals), "Deployment"))
		c := dep.Spec.Template.Spec.Containers[0]
		if !slices.Equal(c.Command, []string{"/manager"}) {
			t.Errorf("%s: command = %q, the image's binary is /manager", name, c.Command)
		}
		if out, err := run(c.Args); err != nil {
			t.Errorf("%s: manager refuses the rendered args %q: %v\n%s", name, c.Args, err, out)
		} else if !strings.Contains(out, "-broker-image") {
			t.Errorf("%s: --help printed no usage:\n%s", name, out)
		}
	}
	// The check can fail: a flag the manager lacks, or a malformed value, is refused.
	for _, args := range [][]string{{"--no-such-flag=1"}, {"--status-interval=soon"}} {
		if out, err := run(args); err == nil {
			t.Errorf("manager accepted %q:\n%s", args, out)
		}
	}
}

func TestClusterRoleRulesEqualTheGeneratedRole(t *testing.T) {
	generated := decodeFile(t, filepath.Join(repoRoot(t), "config", "rbac", "role.yaml"))
	if len(generated) != 1 || generated[0].GetKind() != "ClusterRole" || generated[0].GetName() != "manager-role" {
		t.Fatalf("config/rbac/role.yaml holds %d objects, want the ClusterRole manager-role", len(generated))
	}
	want := typed[rbacv1.ClusterRole](t, generated[0]).Rules
	if len(want) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	got := typed[rbacv1.ClusterRole](t, managerClusterRole(t, render(t, ""))).Rules
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("chart ClusterRole rules differ from config/rbac/role.yaml (copy them from there):\n got %+v\nwant %+v",
			got, want)
	}
}

func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := repoRoot(t)
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(bases) == 0 {
		t.Fatalf("config/crd/bases: %v %v", bases, err)
	}
	chartCRDs, err := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(chartCRDs) != len(bases) {
		t.Errorf("chart has %d CRD files, config/crd/bases %d", len(chartCRDs), len(bases))
	}
	for _, b := range bases {
		want, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir(t), "crds", filepath.Base(b)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("crds/%s is not a copy of config/crd/bases (run hack/manifests.sh): %v", filepath.Base(b), err)
		}
	}
	var names []string
	for _, f := range loadChart(t).CRDObjects() {
		o, err := decode(string(f.File.Data))
		if err != nil || o == nil || o.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		names = append(names, o.GetName())
	}
	slices.Sort(names)
	if want := []string{"fanoutlinks.narad.dev", "naradclusters.narad.dev", "naradusers.narad.dev", "topics.narad.dev"}; !slices.Equal(names, want) {
		t.Errorf("Helm sees CRDs %v, want %v", names, want)
	}
}
