package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// valueKeys lists the dotted path of every key in a values tree: maps are walked into, and a
// map key is listed as well as its children.
func valueKeys(prefix string, v interface{}, out map[string]bool) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return
	}
	for k, child := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if sub, ok := child.(map[string]interface{}); ok && len(sub) > 0 {
			valueKeys(path, sub, out)
			continue
		}
		out[path] = true
	}
}

// tableKey matches the key column of a README table row: | `a.b.c` | ...
var tableKey = regexp.MustCompile("^\\|\\s*`([A-Za-z0-9_.]+)`\\s*\\|")

func TestEveryValueIsDocumentedInTheReadme(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]interface{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	valueKeys("", vals, keys)
	if len(keys) < 20 {
		t.Fatalf("found only %d value keys: %v", len(keys), keys)
	}

	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if m := tableKey.FindStringSubmatch(line); m != nil {
			documented[m[1]] = true
		}
	}
	var missing []string
	for k := range keys {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("values missing from the README's table: %v", missing)
	}
	// A documented key must exist (or be the parent of one): the table never describes a value
	// the chart no longer has.
	var stale []string
	for k := range documented {
		exists := keys[k]
		for v := range keys {
			exists = exists || strings.HasPrefix(v, k+".")
		}
		if !exists {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("README documents values the chart does not have: %v", stale)
	}
}
