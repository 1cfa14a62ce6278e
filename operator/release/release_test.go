package release

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"narad.dev/operator/testsupport"
)

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"ghcr.io/narad-dev/narad:0.1.0":                 "0.1.0",
		"narad:v1.2.3":                                  "v1.2.3",
		"registry:5000/narad":                           "",
		"registry:5000/narad:0.2.0":                     "0.2.0",
		"narad@sha256:0123abcd":                         "",
		"registry:5000/narad:0.2.0@sha256:0123abcd":     "0.2.0",
		"narad.local/narad:dev":                         "dev",
		"narad":                                         "",
		"localhost:5000/team/narad-operator:0.1.0-rc.1": "0.1.0-rc.1",
	} {
		if got := ImageTag(image); got != want {
			t.Errorf("ImageTag(%q) = %q, want %q", image, got, want)
		}
	}
}

func TestOperatorManagesItsReleaseAndThePreviousOne(t *testing.T) {
	cases := []struct {
		operator, broker string
		ok               bool
		reason           string
	}{
		{"0.3.0", "0.3.0", true, ReasonSupported},
		{"0.3.0", "v0.3.7", true, ReasonSupported},
		{"0.3.2", "0.3.0", true, ReasonSupported},
		{"0.3.0", "0.2.9", true, ReasonSupported},
		{"0.3.0", "0.3.1-rc.1", true, ReasonSupported},
		{"0.3.0", "0.1.4", false, ReasonTooOld},
		{"0.3.0", "0.4.0", false, ReasonNewerThanOper},
		{"0.3.0", "1.0.0", false, ReasonNewerThanOper},
		{"1.0.0", "0.9.0", true, ReasonSupported},
		{"1.0.0", "0.1.0", true, ReasonSupported},
		{"2.0.0", "0.9.0", false, ReasonTooOld},
		{"1.1.0", "0.9.0", false, ReasonTooOld},
		{"0.1.0", "dev", true, ReasonUnversioned},
		{"0.1.0", "", true, ReasonUnversioned},
		{"0.1.0", "3f2a9c1", true, ReasonUnversioned},
	}
	for _, c := range cases {
		ok, reason, msg := CheckBroker(c.operator, c.broker)
		if ok != c.ok || reason != c.reason || msg == "" {
			t.Errorf("CheckBroker(%q, %q) = %v %s %q, want %v %s", c.operator, c.broker, ok, reason, msg, c.ok, c.reason)
		}
	}
}

// TestVersionAgreesEverywhere: the VERSION file, the chart's appVersion, the kustomize image
// tag and Version name one release, so `make images`, Helm and kustomize install one build.
func TestVersionAgreesEverywhere(t *testing.T) {
	root, err := testsupport.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if v := strings.TrimSpace(string(read("VERSION"))); v != Version {
		t.Errorf("VERSION file says %q, release.Version %q", v, Version)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(read("charts/narad-operator/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != Version {
		t.Errorf("chart appVersion %q, release.Version %q", chart.AppVersion, Version)
	}
	var kust struct {
		Images []struct {
			Name, NewName, NewTag string
		} `json:"images"`
	}
	if err := yaml.Unmarshal(read("config/manager/kustomization.yaml"), &kust); err != nil {
		t.Fatal(err)
	}
	if len(kust.Images) != 1 || kust.Images[0].NewTag != Version {
		t.Errorf("config/manager/kustomization.yaml images %+v, want the tag %q", kust.Images, Version)
	}
}
