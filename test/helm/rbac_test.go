package helm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// named returns the object of a kind, namespace ("" for cluster-scoped) and name, or nil.
func named(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// withSuffix returns the single object of a kind whose name ends in suffix.
func withSuffix(t testing.TB, objs []*unstructured.Unstructured, kind, suffix string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range ofKind(objs, kind) {
		if strings.HasSuffix(o.GetName(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("rendered %d %s objects named *%s, want 1", len(found), kind, suffix)
	}
	return found[0]
}

func managerClusterRole(t testing.TB, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return withSuffix(t, objs, "ClusterRole", "-manager")
}

func leaderElectionRole(t testing.TB, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return withSuffix(t, objs, "Role", "-leader-election")
}

// clusterScoped are the cluster-scoped resources the manager's rules name.
var clusterScoped = map[string]bool{"nodes": true, "persistentvolumes": true, "customresourcedefinitions": true,
	"clusterrolebindings": true, "clusterroles": true, "namespaces": true, "storageclasses": true}

// permissions flattens rules into "group/resource:verb" strings.
func permissions(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	return out
}

func generatedRules(t testing.TB) []rbacv1.PolicyRule {
	t.Helper()
	generated := decodeFile(t, filepath.Join(repoRoot(t), "config", "rbac", "role.yaml"))
	if len(generated) != 1 || generated[0].GetKind() != "ClusterRole" {
		t.Fatalf("config/rbac/role.yaml holds %d objects, want the ClusterRole manager-role", len(generated))
	}
	return typed[rbacv1.ClusterRole](t, generated[0]).Rules
}

// With watchNamespace, the manager's namespaced rights live in a Role of that namespace and its
// ClusterRole keeps only cluster-scoped kinds; together they are exactly the generated rules.
func TestWatchNamespaceScopesTheManagerRulesToARole(t *testing.T) {
	objs := render(t, "watchNamespace: queues")
	checkWiring(t, objs)
	role := typed[rbacv1.Role](t, named(objs, "Role", "queues", "narad-operator-manager"))
	cr := typed[rbacv1.ClusterRole](t, managerClusterRole(t, objs))
	if named(objs, "RoleBinding", "queues", "narad-operator-manager") == nil {
		t.Error("no RoleBinding of the manager Role in the watched namespace")
	}
	union := permissions(role.Rules)
	for p := range permissions(cr.Rules) {
		res := strings.SplitN(strings.SplitN(p, "/", 2)[1], ":", 2)[0]
		if !clusterScoped[res] {
			t.Errorf("namespaced mode: the ClusterRole grants %s cluster-wide", p)
		}
		union[p] = true
	}
	for p := range permissions(role.Rules) {
		if res := strings.SplitN(strings.SplitN(p, "/", 2)[1], ":", 2)[0]; clusterScoped[res] {
			t.Errorf("the Role grants %s, which no Role can", p)
		}
	}
	want := permissions(generatedRules(t))
	if !equality.Semantic.DeepEqual(union, want) {
		for p := range want {
			if !union[p] {
				t.Errorf("namespaced mode lacks %s (config/rbac/role.yaml has it)", p)
			}
		}
		for p := range union {
			if !want[p] {
				t.Errorf("namespaced mode grants %s, which config/rbac/role.yaml does not", p)
			}
		}
	}

	// Without watchNamespace there is no manager Role: the ClusterRole holds everything.
	if r := named(render(t, ""), "Role", releaseNamespace, "narad-operator-manager"); r != nil {
		t.Error("cluster-wide mode rendered a manager Role")
	}
}

// crdPlurals are the plural names of the chart's CRDs.
func crdPlurals(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, f := range loadChart(t).CRDObjects() {
		o, err := decode(string(f.File.Data))
		if err != nil || o == nil {
			t.Fatalf("%s: %v", f.Filename, err)
		}
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		out = append(out, plural)
	}
	slices.Sort(out)
	return out
}

// The aggregated roles carry the labels Kubernetes aggregates by, cover every CRD, and are the
// same in the chart and in config/rbac.
func TestAggregatedRolesCoverEveryNaradKind(t *testing.T) {
	objs := render(t, "")
	view := typed[rbacv1.ClusterRole](t, withSuffix(t, objs, "ClusterRole", "-view"))
	edit := typed[rbacv1.ClusterRole](t, withSuffix(t, objs, "ClusterRole", "-edit"))
	if view.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
		t.Errorf("view role labels = %v", view.Labels)
	}
	if edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" ||
		edit.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" {
		t.Errorf("edit role labels = %v", edit.Labels)
	}
	vp, ep := permissions(view.Rules), permissions(edit.Rules)
	plurals := crdPlurals(t)
	if len(plurals) < 3 {
		t.Fatalf("chart CRDs: %v", plurals)
	}
	for _, plural := range plurals {
		for _, v := range []string{"get", "list", "watch"} {
			if !vp["narad.dev/"+plural+":"+v] {
				t.Errorf("view cannot %s %s", v, plural)
			}
		}
		for _, v := range []string{"create", "update", "patch", "delete"} {
			if vp["narad.dev/"+plural+":"+v] {
				t.Errorf("view may %s %s", v, plural)
			}
			if !ep["narad.dev/"+plural+":"+v] {
				t.Errorf("edit cannot %s %s", v, plural)
			}
		}
	}
	kustomize := decodeFile(t, filepath.Join(repoRoot(t), "config", "rbac", "aggregated_roles.yaml"))
	if len(kustomize) != 2 {
		t.Fatalf("config/rbac/aggregated_roles.yaml holds %d objects, want 2", len(kustomize))
	}
	for i, want := range []*rbacv1.ClusterRole{view, edit} {
		got := typed[rbacv1.ClusterRole](t, kustomize[i])
		if !equality.Semantic.DeepEqual(got.Rules, want.Rules) {
			t.Errorf("config/rbac %s rules differ from the chart's %s", got.Name, want.Name)
		}
		for k, v := range want.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/") && got.Labels[k] != v {
				t.Errorf("config/rbac %s lacks label %s=%s", got.Name, k, v)
			}
		}
	}
}

// The rules work: a user bound in a namespace to the view role reads the Narad objects and
// cannot change them; one bound to the edit role can.
func TestAggregatedRolesGrantWhatTheySay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newClient(t)
	const ns = "rbac-users"
	ensureNamespace(t, ctx, admin, ns)
	objs := renderRelease(t, release{name: "aggregated", namespace: "rbac-operator"}, "")
	users := map[string]client.Client{}
	for _, suffix := range []string{"-view", "-edit"} {
		role := withSuffix(t, objs, "ClusterRole", suffix)
		if err := admin.Create(ctx, role.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		user := "narad" + suffix
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.GetName()},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if err := admin.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:authenticated"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(u.Config(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		users[suffix] = c
	}
	sample := decodeFile(t, filepath.Join(repoRoot(t), "config", "samples", "narad_v1alpha1_naradcluster.yaml"))[0]
	sample.SetNamespace(ns)
	list := func(c client.Client) error {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("narad.dev/v1alpha1")
		l.SetKind("NaradClusterList")
		return c.List(ctx, &l, client.InNamespace(ns))
	}
	create := func(c client.Client) error { return c.Create(ctx, sample.DeepCopy(), client.DryRunAll) }

	if err := list(users["-view"]); err != nil {
		t.Errorf("view: list NaradClusters: %v", err)
	}
	if err := create(users["-view"]); !apierrors.IsForbidden(err) {
		t.Errorf("view: create a NaradCluster: err = %v, want Forbidden", err)
	}
	if err := create(users["-edit"]); err != nil {
		t.Errorf("edit: create a NaradCluster: %v", err)
	}
	// Bound in one namespace, neither reaches another.
	var other unstructured.UnstructuredList
	other.SetAPIVersion("narad.dev/v1alpha1")
	other.SetKind("NaradClusterList")
	if err := users["-edit"].List(ctx, &other, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("edit bound in %s lists NaradClusters in default: err = %v, want Forbidden", ns, err)
	}
}

// config/default installs the rack ClusterRole under the name the manager binds to by default.
func TestKustomizeRackRoleIsTheManagersDefault(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "config", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		NamePrefix string `json:"namePrefix"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	role := only(t, decodeFile(t, filepath.Join(root, "config", "rbac", "broker_rack_role.yaml")), "ClusterRole")
	rules := typed[rbacv1.ClusterRole](t, role).Rules
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}}; !equality.Semantic.DeepEqual(rules, want) {
		t.Errorf("rack role rules = %+v, want get nodes only", rules)
	}
	installed := k.NamePrefix + role.GetName()

	out, err := runManagerHelp(t)
	if err != nil {
		t.Fatalf("manager --help: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`-rack-cluster-role string[^\n]*\n(?:[^\n]*\n)*?[^\n]*\(default "([^"]+)"\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("--help shows no default for -rack-cluster-role:\n%s", out)
	}
	if m[1] != installed {
		t.Errorf("config/default installs the rack role as %q, the manager binds to %q by default", installed, m[1])
	}
}

// runManagerHelp runs the manager binary's --help.
func runManagerHelp(t testing.TB) (string, error) {
	t.Helper()
	out, err := exec.Command(managerBinary(t), "--help").CombinedOutput()
	return string(out), err
}
