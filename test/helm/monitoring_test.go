package helm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The chart's broker alerts and dashboard are copies of config/prometheus/broker-rules.yaml and
// config/grafana/narad-dashboard.json (docs/operating.md, "Alerts and runbooks"); the broker
// module's TestShippedAlertsAndDashboardReadOnlyRegisteredFamilies parses those files' PromQL
// against the broker's registry. These tests prove the chart renders exactly them.

func TestPrometheusRuleAndDashboardAreOffByDefault(t *testing.T) {
	objs := render(t, "")
	for _, kind := range []string{"PrometheusRule", "ConfigMap"} {
		if n := len(ofKind(objs, kind)); n != 0 {
			t.Errorf("default render has %d %s", n, kind)
		}
	}
}

func TestPrometheusRuleRendersTheShippedRules(t *testing.T) {
	pr := only(t, render(t, "prometheusRule: {enabled: true, labels: {release: kps}}"), "PrometheusRule")
	if pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetNamespace() != releaseNamespace {
		t.Errorf("PrometheusRule %s in %q", pr.GetAPIVersion(), pr.GetNamespace())
	}
	if l := pr.GetLabels(); l["release"] != "kps" || l["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("PrometheusRule labels = %v, want release=kps and the chart's own", l)
	}
	shipped := only(t, decodeFile(t, filepath.Join(repoRoot(t), "config", "prometheus", "broker-rules.yaml")), "PrometheusRule")
	if !equality.Semantic.DeepEqual(pr.Object["spec"], shipped.Object["spec"]) {
		t.Fatalf("the chart's rules differ from config/prometheus/broker-rules.yaml: copy that file's spec into charts/narad-operator/files/broker-rules.yaml")
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			if name, _, _ := unstructured.NestedString(r.(map[string]any), "alert"); name != "" {
				alerts++
			}
		}
	}
	if alerts < 10 {
		t.Errorf("rendered %d alerts, want the dozen of docs/operating.md", alerts)
	}
}

func TestDashboardConfigMapCarriesTheShippedDashboard(t *testing.T) {
	objs := render(t, "grafanaDashboard: {enabled: true, labels: {team: q}, annotations: {grafana_folder: Narad}}")
	cm := only(t, objs, "ConfigMap")
	if l := cm.GetLabels(); l["grafana_dashboard"] != "1" || l["team"] != "q" {
		t.Errorf("dashboard ConfigMap labels = %v, want grafana_dashboard=1 and team=q", l)
	}
	if cm.GetNamespace() != releaseNamespace || cm.GetAnnotations()["grafana_folder"] != "Narad" {
		t.Errorf("dashboard ConfigMap in %q with annotations %v", cm.GetNamespace(), cm.GetAnnotations())
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "narad.json")
	want, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "grafana", "narad-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.TrimRight(string(want), "\n") {
		t.Fatalf("the chart's dashboard differs from config/grafana/narad-dashboard.json: copy it into charts/narad-operator/files/")
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []any  `json:"panels"`
	}
	if err := json.Unmarshal([]byte(got), &dash); err != nil || dash.UID == "" || len(dash.Panels) < 20 {
		t.Fatalf("dashboard: uid %q, %d panels, err %v", dash.UID, len(dash.Panels), err)
	}

	other := only(t, render(t, "grafanaDashboard: {enabled: true, namespace: monitoring}"), "ConfigMap")
	if other.GetNamespace() != "monitoring" {
		t.Errorf("grafanaDashboard.namespace=monitoring: ConfigMap in %q", other.GetNamespace())
	}
}
