package plugin

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/operator/naming"
)

// allowDrain is an operator whose brokers allow removing every node above replicas, moving each
// node's partitions to demo-0 and demo-1.
func allowDrain(nc *naradv1.NaradCluster, replicas int32) naradv1.ScalePreview {
	p := naradv1.ScalePreview{Allowed: true}
	for i := nc.Spec.Replicas - 1; i >= replicas; i-- {
		id := naming.NodeID(nc, i)
		p.Nodes = append(p.Nodes, naradv1.NodePreview{NodeID: id, Allowed: true, Moves: []naradv1.PlannedMove{
			{Topic: "orders", Partition: 2, From: id, To: "demo-0"},
			{Topic: "audit", Partition: 0, From: id, To: "demo-1"},
		}})
	}
	return p
}

// refuseQuorum is an operator whose brokers refuse: removing the node would break quorum.
func refuseQuorum(nc *naradv1.NaradCluster, replicas int32) naradv1.ScalePreview {
	p := naradv1.ScalePreview{Allowed: false}
	for i := nc.Spec.Replicas - 1; i >= replicas; i-- {
		p.Nodes = append(p.Nodes, naradv1.NodePreview{NodeID: naming.NodeID(nc, i), Allowed: false,
			Reasons: []string{"min_voters", "no_live_majority"}})
	}
	return p
}

func previewRequest(t *testing.T, ns, name string) string {
	t.Helper()
	return getCluster(t, ns, name).Annotations[naming.ScalePreviewAnnotation]
}

func TestScaleDownDryRunPrintsMovesAndChangesNothing(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, naradv1.NaradClusterStatus{})
	answered := playOperator(t, ns, "demo", allowDrain)

	r := run(t, "", "scale", "demo", "--to", "3", "--dry-run", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out,
		`^Scale-down preview of demo from 4 to 3 replicas \(request 3/[0-9a-f]{16}, computed 2026-03-01T12:00:00Z\)$`,
		`^NODE\s+VERDICT\s+REASONS$`,
		`^demo-3\s+allowed\s+-$`,
		`^Planned partition moves \(2\):$`,
		`^NODE\s+TOPIC\s+PARTITION\s+MOVE$`,
		`^demo-3\s+orders\s+2\s+demo-3 → demo-0$`,
		`^demo-3\s+audit\s+0\s+demo-3 → demo-1$`,
		`^Dry run: the brokers allow scaling demo down to 3; nothing changed\.$`)
	nc := getCluster(t, ns, "demo")
	if nc.Spec.Replicas != 4 {
		t.Fatalf("--dry-run changed spec.replicas to %d", nc.Spec.Replicas)
	}
	if req := nc.Annotations[naming.ScalePreviewAnnotation]; !regexp.MustCompile(`^3/[0-9a-f]{16}$`).MatchString(req) {
		t.Fatalf("preview annotation %q", req)
	}
	if answered() != 1 {
		t.Fatalf("operator answered %d previews, want 1", answered())
	}
}

func TestScaleDownDryRunDocumentCarriesThePreview(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 5, naradv1.NaradClusterStatus{})
	playOperator(t, ns, "demo", allowDrain)

	r := run(t, "", "scale", "demo", "--to", "3", "--dry-run", "-n", ns, "-o", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	var got scaleResult
	decode(t, "json", r.out, &got)
	if got.Preview == nil || got.Preview.Request != previewRequest(t, ns, "demo") {
		t.Fatalf("preview %+v does not answer the annotation", got.Preview)
	}
	nodes := []string{}
	for _, n := range got.Preview.Nodes {
		nodes = append(nodes, n.NodeID)
	}
	if d := cmp.Diff([]string{"demo-4", "demo-3"}, nodes); d != "" || got.Applied || !got.DryRun ||
		got.From != 5 || got.To != 3 || !got.Preview.Allowed {
		t.Fatalf("scale -o json: %+v (nodes -want +got %s)", got, d)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 5 {
		t.Fatalf("--dry-run changed spec.replicas to %d", n)
	}
}

func TestRefusedScaleDownExitsOneAndKeepsSpec(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 3, naradv1.NaradClusterStatus{})
	playOperator(t, ns, "demo", refuseQuorum)

	r := run(t, "", "scale", "demo", "--to", "2", "--yes", "-n", ns)
	if r.code != ExitFailed {
		t.Fatalf("exit %d, want %d; stdout %s stderr %s", r.code, ExitFailed, r.out, r.err)
	}
	wantLines(t, r.out, `^demo-2\s+refused\s+min_voters,no_live_majority$`, `^Planned partition moves: none$`,
		`^The brokers refuse this scale-down; spec.replicas stays 3\.$`)
	if !strings.Contains(r.err, "refused: demo-2 (min_voters, no_live_majority)") {
		t.Fatalf("stderr lacks the reasons: %q", r.err)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 3 {
		t.Fatalf("a refused scale-down changed spec.replicas to %d", n)
	}

	doc := run(t, "", "scale", "demo", "--to", "2", "-n", ns, "-o", "yaml")
	var got scaleResult
	decode(t, "yaml", doc.out, &got)
	if doc.code != ExitFailed || got.Applied || got.Preview == nil || got.Preview.Allowed ||
		got.Preview.Nodes[0].Reasons[0] != "min_voters" {
		t.Fatalf("exit %d, document %+v", doc.code, got)
	}
}

func TestAllowedScaleDownPatchesReplicas(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, naradv1.NaradClusterStatus{})
	playOperator(t, ns, "demo", allowDrain)

	r := run(t, "", "scale", "demo", "--to", "3", "--yes", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out, `^demo-3\s+orders\s+2\s+demo-3 → demo-0$`,
		`^spec.replicas of demo lowered from 4 to 3\. The operator decommissions demo-3 .*watch with: kubectl narad status demo -n `+ns+`$`)
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 3 {
		t.Fatalf("spec.replicas = %d, want 3", n)
	}
}

func TestScaleDownAsksBeforePatching(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 5, naradv1.NaradClusterStatus{})
	playOperator(t, ns, "demo", allowDrain)

	no := run(t, "n\n", "scale", "demo", "--to", "4", "-n", ns)
	if no.code != ExitFailed || !strings.Contains(no.err, "Lower spec.replicas of demo from 5 to 4? [y/N]") ||
		!strings.Contains(no.err, "not confirmed") {
		t.Fatalf("answer n: exit %d, stderr %q", no.code, no.err)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 5 {
		t.Fatalf("an unconfirmed scale-down changed spec.replicas to %d", n)
	}
	yes := run(t, "yes\n", "scale", "demo", "--to", "4", "-n", ns)
	if yes.code != ExitOK {
		t.Fatalf("answer yes: exit %d, stderr %q", yes.code, yes.err)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 4 {
		t.Fatalf("spec.replicas = %d after a confirmed scale-down, want 4", n)
	}
}

func TestScaleUpPatchesWithoutPreview(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 3, naradv1.NaradClusterStatus{})

	r := run(t, "", "scale", "demo", "--to", "5", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	wantLines(t, r.out, `^Scaling NaradCluster demo up from 3 to 5 replicas\. `)
	nc := getCluster(t, ns, "demo")
	if nc.Spec.Replicas != 5 {
		t.Fatalf("spec.replicas = %d, want 5", nc.Spec.Replicas)
	}
	if req, ok := nc.Annotations[naming.ScalePreviewAnnotation]; ok {
		t.Fatalf("a scale-up asked for a preview: %q", req)
	}

	same := run(t, "", "scale", "demo", "--to", "5", "-n", ns)
	if same.code != ExitOK || !strings.Contains(same.out, "already has 5 replicas") {
		t.Fatalf("no-op scale: exit %d, stdout %q", same.code, same.out)
	}
}

func TestScaleFailsWhenTheOperatorDoesNotAnswer(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, naradv1.NaradClusterStatus{})

	start := time.Now()
	r := run(t, "", "scale", "demo", "--to", "3", "--yes", "--timeout", "500ms", "-n", ns)
	if r.code != ExitFailed || !strings.Contains(r.err, "the operator did not answer the scale preview") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("--timeout 500ms took %s", took)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 4 {
		t.Fatalf("spec.replicas = %d after an unanswered preview, want 4", n)
	}
}

func TestScalePreviewErrorFails(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, naradv1.NaradClusterStatus{})
	playOperator(t, ns, "demo", func(*naradv1.NaradCluster, int32) naradv1.ScalePreview {
		return naradv1.ScalePreview{Error: "no broker answered"}
	})
	r := run(t, "", "scale", "demo", "--to", "3", "--yes", "-n", ns)
	if r.code != ExitFailed || !strings.Contains(r.err, "scale preview failed: no broker answered") {
		t.Fatalf("exit %d, stderr %q", r.code, r.err)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 4 {
		t.Fatalf("spec.replicas = %d after a failed preview, want 4", n)
	}
}

func TestDecommissionOnlyTheHighestOrdinal(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 4, naradv1.NaradClusterStatus{})
	answered := playOperator(t, ns, "demo", allowDrain)

	for _, node := range []string{"demo-1", "1"} {
		r := run(t, "", "decommission", "demo", node, "-n", ns)
		if r.code != ExitFailed || !strings.Contains(r.err, "only the highest ordinal (demo-3) can be decommissioned") ||
			!strings.Contains(r.err, "kubectl narad scale demo --to 1") {
			t.Fatalf("decommission %s: exit %d, stderr %q", node, r.code, r.err)
		}
	}
	if r := run(t, "", "decommission", "demo", "demo-7", "-n", ns); r.code != ExitFailed ||
		!strings.Contains(r.err, "demo-7 is not in NaradCluster demo") {
		t.Fatalf("decommission demo-7: exit %d, stderr %q", r.code, r.err)
	}
	if answered() != 0 || previewRequest(t, ns, "demo") != "" {
		t.Fatalf("a refused decommission asked for a preview")
	}

	dry := run(t, "", "decommission", "demo", "demo-3", "--dry-run", "-n", ns)
	if dry.code != ExitOK {
		t.Fatalf("dry run: exit %d, stderr %s", dry.code, dry.err)
	}
	wantLines(t, dry.out, `^Scale-down preview of demo from 4 to 3 replicas`, `^demo-3\s+allowed\s+-$`,
		`^demo-3\s+orders\s+2\s+demo-3 → demo-0$`, `^Dry run: `)
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 4 {
		t.Fatalf("--dry-run changed spec.replicas to %d", n)
	}

	r := run(t, "", "decommission", "demo", "3", "--yes", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	if n := getCluster(t, ns, "demo").Spec.Replicas; n != 3 {
		t.Fatalf("spec.replicas = %d after decommissioning demo-3, want 3", n)
	}
}

func TestRestartSetsTheAnnotation(t *testing.T) {
	ns := newNamespace(t)
	createCluster(t, ns, "demo", 3, naradv1.NaradClusterStatus{})

	r := run(t, "", "restart", "demo", "-n", ns)
	if r.code != ExitOK {
		t.Fatalf("exit %d, stderr %s", r.code, r.err)
	}
	if got := getCluster(t, ns, "demo").Annotations[naming.RestartedAtAnnotation]; got != "2026-03-01T12:00:00Z" {
		t.Fatalf("%s = %q", naming.RestartedAtAnnotation, got)
	}
	wantLines(t, r.out, `^Restart of demo requested \(narad.dev/restartedAt=2026-03-01T12:00:00Z\)\. `)

	doc := run(t, "", "restart", "demo", "-n", ns, "-o", "json")
	var got restartResult
	decode(t, "json", doc.out, &got)
	if doc.code != ExitOK || got != (restartResult{Cluster: "demo", Namespace: ns, RestartedAt: "2026-03-01T12:00:00Z"}) {
		t.Fatalf("exit %d, document %+v", doc.code, got)
	}
}
