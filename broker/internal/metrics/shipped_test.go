package metrics

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// The alerts and the dashboard the project ships (docs/operating.md, "Alerts and runbooks"):
// config/prometheus/broker-rules.yaml and config/grafana/narad-dashboard.json. test/helm keeps
// the chart's copies equal to them. Every expression must parse with Prometheus's own PromQL
// parser and read only families this registry registers, and every runbook link must reach a
// section of docs/operating.md, so renaming a metric or a heading breaks this test, not a
// page at 3 a.m.

const (
	rulesFile     = "config/prometheus/broker-rules.yaml"
	dashboardFile = "config/grafana/narad-dashboard.json"
	runbookPage   = "docs/operating.md"
	runbookPrefix = "https://github.com/narad-dev/narad/blob/main/" + runbookPage + "#"
)

// scrapeNames are series Prometheus itself adds to every target.
var scrapeNames = []string{"up"}

// repoFile reads a file by its path from the repository root (this package is three levels
// below it).
func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// knownSeries maps every series name a scrape of this registry can carry to its family:
// each family's name, and for histograms its _bucket, _sum and _count series.
func knownSeries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, f := range familyFields(t, New()) {
		out[name] = name
		switch f.Interface().(type) {
		case *prometheus.HistogramVec, prometheus.Histogram:
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = name
			}
		}
	}
	if len(out) < 80 {
		t.Fatalf("only %d series names from the registry: the reflection walk is broken", len(out))
	}
	for _, n := range scrapeNames {
		out[n] = n
	}
	return out
}

// grafanaMacros are the range variables Grafana substitutes before a query reaches Prometheus.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// seriesOf parses expr as PromQL (after Grafana's range macros) and returns the series names
// its selectors read; a selector without a fixed name is an error.
func seriesOf(expr string) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaMacros.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			err = errors.Join(err, fmt.Errorf("selector %s names no metric", vs))
		}
		names = append(names, name)
		return nil
	})
	return names, err
}

// checkExpr reports what is wrong with one shipped expression: a parse error, or series the
// broker does not register.
func checkExpr(known map[string]string, expr string) error {
	names, err := seriesOf(expr)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return errors.New("reads no series")
	}
	for _, n := range names {
		if _, ok := known[n]; !ok {
			err = errors.Join(err, fmt.Errorf("%s is not registered by the broker", n))
		}
	}
	return err
}

// headingAnchors is the GitHub anchor of every heading of a Markdown page.
func headingAnchors(page []byte) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(page)))
	fence := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		out[b.String()] = true
	}
	return out
}

type ruleFile struct {
	Spec struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	} `yaml:"spec"`
}

// TestCheckerRefusesWhatWouldBreakAnAlert: the checks below can fail.
func TestCheckerRefusesWhatWouldBreakAnAlert(t *testing.T) {
	known := knownSeries(t)
	for expr, bad := range map[string]bool{
		`sum by (namespace) (narad_under_min_isr_partitions) > 0`:                         false,
		`histogram_quantile(0.99, rate(narad_storage_fsync_duration_seconds_bucket[5m]))`: false,
		`up == 0`: false,
		`rate(narad_messages_produced_total[$__rate_interval])`:                             false,
		`narad_raft_has_leader == 0 and narad_cluster_members{status="dead"} > 0`:           false,
		`narad_raft_is_leader == 1`:                                                         true, // not a family
		`rate(narad_messages_produced_total[5m]`:                                            true, // does not parse
		`{status="dead"}`:                                                                   true, // no metric name
		`narad_moves_total_bucket`:                                                          true, // not a histogram
		`sum(rate(narad_fanout_committed_total[5m])) by`:                                    true,
		`narad_data_dir_available_bytes / narad_data_dir_capacity_bytes < 0.1`:              false,
		`present_over_time(narad_boot_duration_seconds[6h]) and on (instance) (up == 0)`:    false,
		`label_replace(narad_cluster_members, "x", "$1", "status", "(.*)")`:                 false,
		`max by (topic) (narad_oldest_unconsumed_message_age_seconds{topic=~"$topic"}) > 1`: false,
	} {
		if err := checkExpr(known, expr); (err != nil) != bad {
			t.Errorf("%q: err = %v, want an error: %v", expr, err, bad)
		}
	}
	anchors := headingAnchors([]byte("# A page\n## Alerts and runbooks\n### NaradBrokerDown\n```sh\n# not a heading\n```\n"))
	if !anchors["naradbrokerdown"] || !anchors["alerts-and-runbooks"] || anchors["not-a-heading"] {
		t.Errorf("anchors %v", anchors)
	}
}

func TestShippedAlertsReadOnlyRegisteredFamiliesAndLinkTheirRunbooks(t *testing.T) {
	known := knownSeries(t)
	anchors := headingAnchors(repoFile(t, runbookPage))
	var rf ruleFile
	if err := yaml.Unmarshal(repoFile(t, rulesFile), &rf); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range rf.Spec.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if err := checkExpr(known, r.Expr); err != nil {
				t.Errorf("%s: %v\n%s", name, err, r.Expr)
			}
			if r.Record != "" {
				continue
			}
			alerts[r.Alert] = true
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", name, r.For, err)
				}
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", name, sev)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s", name, a)
				}
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookPrefix)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not a section of %s (%s<heading anchor>)", name, url, runbookPage, runbookPrefix)
			}
		}
	}
	// The alerts of the issue, each of which must keep working.
	for _, a := range []string{"NaradBrokerDown", "NaradMemberDead", "NaradNoRaftLeader", "NaradUnderReplicatedPartitions",
		"NaradUnderMinISRPartitions", "NaradConsumerBacklogOld", "NaradFanoutStalled", "NaradDecommissionBlocked",
		"NaradDiskNearlyFull"} {
		if !alerts[a] {
			t.Errorf("alert %s missing from %s", a, rulesFile)
		}
	}
}

// labelValuesQuery matches a Grafana template variable query label_values(<series>, <label>).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$`)

// dashboardQueries returns the PromQL of every panel target (rows' nested panels included)
// and every label_values variable, each with where it is.
func dashboardQueries(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p struct {
				Title   string            `json:"title"`
				Panels  []json.RawMessage `json:"panels"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			}
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		sub := labelValuesQuery.FindStringSubmatch(q)
		if sub == nil {
			t.Errorf("variable %s: query %q is not label_values(<series>, <label>)", v.Name, q)
			continue
		}
		out["variable "+v.Name] = sub[1]
	}
	return out
}

func TestShippedDashboardReadsOnlyRegisteredFamilies(t *testing.T) {
	known := knownSeries(t)
	queries := dashboardQueries(t, repoFile(t, dashboardFile))
	if len(queries) < 40 {
		t.Fatalf("found %d queries in %s: the walk is broken", len(queries), dashboardFile)
	}
	shown := map[string]bool{}
	for where, expr := range queries {
		if err := checkExpr(known, expr); err != nil {
			t.Errorf("%s: %v\n%s", where, err, expr)
		}
		names, _ := seriesOf(expr)
		for _, n := range names {
			shown[known[n]] = true
		}
	}
	// What the dashboard is for (docs/operating.md): traffic, latency, backlog, fan-out,
	// replication, Raft and members, moves and drains, disk and fsync.
	for _, f := range []string{"narad_messages_produced_total", "narad_messages_consumed_total",
		"narad_http_request_duration_seconds", "narad_consumer_lag_messages", "narad_oldest_unconsumed_message_age_seconds",
		"narad_fanout_lag_messages", "narad_partition_isr", "narad_under_replicated_partitions",
		"narad_leader_elections_total", "narad_raft_leader", "narad_cluster_members", "narad_moves_inflight",
		"narad_decommission_blocked", "narad_data_dir_available_bytes", "narad_storage_fsync_duration_seconds"} {
		if !shown[f] {
			t.Errorf("the dashboard shows no %s", f)
		}
	}
}
