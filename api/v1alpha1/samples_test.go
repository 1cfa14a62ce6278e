package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// TestSamplesAreValid decodes each config/samples file strictly into its Go type (an unknown
// or misspelled field fails) and passes it through the CRD's defaults, OpenAPI schema and CEL
// rules, so `kubectl apply -k config/samples` cannot be refused for a schema reason.
func TestSamplesAreValid(t *testing.T) {
	for _, tc := range []struct {
		file, plural string
		into         runtime.Object
	}{
		{"narad_v1alpha1_naradcluster.yaml", "naradclusters", &NaradCluster{}},
		{"narad_v1alpha1_topic.yaml", "topics", &Topic{}},
		{"narad_v1alpha1_fanoutlink.yaml", "fanoutlinks", &FanoutLink{}},
		{"narad_v1alpha1_fanoutlink_remote.yaml", "fanoutlinks", &FanoutLink{}},
		{"narad_v1alpha1_naraduser.yaml", "naradusers", &NaradUser{}},
		{"narad_v1alpha1_naraduser_password.yaml", "naradusers", &NaradUser{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("../../config/samples", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, tc.into); err != nil {
				t.Fatalf("does not decode strictly into %T: %v", tc.into, err)
			}
			jsonData, err := yaml.YAMLToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			var u map[string]any
			if err := json.Unmarshal(jsonData, &u); err != nil {
				t.Fatal(err)
			}
			if msgs := newAdmission(t, tc.plural).check(u, nil); len(msgs) > 0 {
				t.Fatalf("the API server would refuse it: %v", msgs)
			}
		})
	}
}
