package v1alpha1

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemavalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// crdDir holds the CRDs controller-gen writes (hack/manifests.sh).
const crdDir = "../../config/crd/bases"

func loadCRD(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(crdDir, "narad.dev_"+plural+".yaml"))
	if err != nil {
		t.Fatalf("read CRD (run hack/manifests.sh): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: not an apiextensions/v1 CRD: %v", plural, err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd
}

type column struct{ name, jsonPath string }

var crdExpectations = []struct {
	plural, kind string
	columns      []column
	// rules maps a dotted schema path under the version's openAPIV3Schema to the CEL rules
	// that must sit there.
	rules map[string][]string
	scale bool
}{
	{
		plural: "naradclusters", kind: "NaradCluster", scale: true,
		columns: []column{
			{"Replicas", ".spec.replicas"}, {"Ready", ".status.readyReplicas"},
			{"Leader", ".status.leader"}, {"Moves", ".status.moves.inFlight"},
			{"UnderReplicated", ".status.replication.underReplicatedPartitions"},
			{"Version", ".status.version"},
			{"Age", ".metadata.creationTimestamp"},
		},
		rules: map[string][]string{
			"spec.storage.size":       {"!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0"},
			"spec":                    {"oldSelf.hasValue() || !has(self.replicas) || !has(self.initialClusterSize) || self.replicas >= self.initialClusterSize"},
			"spec.initialClusterSize": {"self % 2 == 1", "self == oldSelf"},
			"spec.tls":                {"!(has(self.secretName) && has(self.certManager))"},
			"spec.broker":             {"!has(self.defaultPartitions) || !has(self.maxPartitions) || self.defaultPartitions <= self.maxPartitions"},
			"spec.broker.retentionMs": {"self == 0 || self >= 3600000"},
			"spec.topicDefaults":      {"!has(self.replicationFactor) || !has(self.minInSyncReplicas) || self.minInSyncReplicas <= self.replicationFactor"},
		},
	},
	{
		plural: "topics", kind: "Topic",
		columns: []column{
			{"Cluster", ".spec.clusterRef.name"}, {"Partitions", ".status.partitions"},
			{"Ready", `.status.conditions[?(@.type=="Ready")].status`}, {"Backlog", ".status.backlog"},
			{"R", ".status.replicationFactor"}, {"UnderReplicated", ".status.underReplicatedPartitions"},
			{"Age", ".metadata.creationTimestamp"},
		},
		rules: map[string][]string{
			"spec": {"!has(oldSelf.name) || (has(self.name) && self.name == oldSelf.name)",
				"!has(self.replicationFactor) || !has(self.minInSyncReplicas) || self.minInSyncReplicas <= self.replicationFactor"},
			"spec.partitions":  {"self >= oldSelf"},
			"spec.name":        {"self != '.' && self != '..'"},
			"spec.clusterRef":  {"self == oldSelf"},
			"spec.retentionMs": {"self == 0 || self >= 3600000"},
		},
	},
	{
		plural: "fanoutlinks", kind: "FanoutLink",
		columns: []column{
			{"Parent", ".spec.parent"}, {"Child", ".spec.child"}, {"Delay", ".spec.delayMs"},
			{"State", ".status.state"}, {"Lag", ".status.lag"},
			{"Remote", ".spec.remote.topic"}, {"Remote-State", ".status.remoteState"},
			{"Ready", `.status.conditions[?(@.type=="Ready")].status`}, {"Age", ".metadata.creationTimestamp"},
		},
		rules: map[string][]string{
			"spec": {
				"has(self.child) != has(self.remote)", "has(self.remote) == has(oldSelf.remote)",
				"!has(self.child) || self.parent != self.child",
				"!has(self.childPartitions) || (has(self.createChild) && self.createChild)",
				"!has(self.remote) || !has(self.createChild) || !self.createChild",
			},
			"spec.delayMs":      {"self == oldSelf"},
			"spec.parent":       {"self == oldSelf"},
			"spec.child":        {"self == oldSelf"},
			"spec.clusterRef":   {"self == oldSelf"},
			"spec.remote":       {"self == oldSelf", "has(self.clusterRef) != has(self.url)"},
			"spec.remote.topic": {"self != '.' && self != '..'"},
		},
	},
	{
		plural: "naradusers", kind: "NaradUser",
		columns: []column{
			{"Cluster", ".spec.clusterRef.name"}, {"Username", ".status.username"},
			{"Ready", `.status.conditions[?(@.type=="Ready")].status`}, {"Secret", ".status.secretName"},
			{"Age", ".metadata.creationTimestamp"},
		},
		rules: map[string][]string{
			"spec":            {"!has(oldSelf.username) || (has(self.username) && self.username == oldSelf.username)"},
			"spec.clusterRef": {"self == oldSelf"},
		},
	},
}

// TestCRDsDeclareTheContract reads the generated CRDs as apiextensions/v1 objects and checks the
// names, scope, subresources, printer columns and CEL rules this package declares.
func TestCRDsDeclareTheContract(t *testing.T) {
	for _, want := range crdExpectations {
		t.Run(want.kind, func(t *testing.T) {
			crd := loadCRD(t, want.plural)
			if crd.Spec.Group != GroupVersion.Group || crd.Spec.Names.Kind != want.kind ||
				crd.Spec.Names.Plural != want.plural || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Fatalf("identity: group %q kind %q plural %q scope %q", crd.Spec.Group,
					crd.Spec.Names.Kind, crd.Spec.Names.Plural, crd.Spec.Scope)
			}
			if !contains(crd.Spec.Names.Categories, "narad") {
				t.Errorf("categories %v lack narad", crd.Spec.Names.Categories)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("want one version, got %d", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != GroupVersion.Version || !v.Served || !v.Storage {
				t.Fatalf("version %q served=%v storage=%v", v.Name, v.Served, v.Storage)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("no status subresource")
			}
			if want.scale {
				s := v.Subresources.Scale
				if s == nil || s.SpecReplicasPath != ".spec.replicas" || s.StatusReplicasPath != ".status.replicas" ||
					s.LabelSelectorPath == nil || *s.LabelSelectorPath != ".status.selector" {
					t.Errorf("scale subresource %+v", s)
				}
			}
			var got []column
			for _, c := range v.AdditionalPrinterColumns {
				got = append(got, column{c.Name, c.JSONPath})
			}
			if !reflect.DeepEqual(got, want.columns) {
				t.Errorf("printer columns\nwant %v\n got %v", want.columns, got)
			}
			for path, rules := range want.rules {
				props := schemaAt(t, v.Schema.OpenAPIV3Schema, path)
				var have []string
				for _, r := range props.XValidations {
					have = append(have, r.Rule)
					if r.Message == "" {
						t.Errorf("%s: rule %q has no message", path, r.Rule)
					}
				}
				for _, r := range rules {
					if !contains(have, r) {
						t.Errorf("%s: rule %q missing; have %q", path, r, have)
					}
				}
			}
		})
	}
}

// TestCRDsPassAPIServerValidation runs the API server's own CRD validation: structural schema,
// defaults that match their schema, and CEL rules that compile within the cost limits.
func TestCRDsPassAPIServerValidation(t *testing.T) {
	for _, want := range crdExpectations {
		t.Run(want.kind, func(t *testing.T) {
			internal := toInternal(t, loadCRD(t, want.plural))
			if errs := validation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
				t.Fatalf("the API server would refuse this CRD: %v", errs.ToAggregate())
			}
		})
	}
}

func toInternal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatalf("convert: %v", err)
	}
	return internal
}

func schemaAt(t *testing.T, root *apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	cur := *root
	for _, key := range strings.Split(path, ".") {
		next, ok := cur.Properties[key]
		if !ok {
			t.Fatalf("schema has no %s (at %q)", path, key)
		}
		cur = next
	}
	return cur
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// admission applies a CRD's defaults, OpenAPI schema and CEL rules to objects the way the API
// server does on create (old == nil) and update (without ratcheting). It exists to prove the
// rules mean what their messages say; envtest suites prove the same against a real API server.
type admission struct {
	structural *structuralschema.Structural
	openAPI    schemavalidation.SchemaValidator
	validator  *cel.Validator
}

func newAdmission(t *testing.T, plural string) *admission {
	t.Helper()
	internal := toInternal(t, loadCRD(t, plural))
	// The internal form hoists a schema shared by every version to spec.validation.
	validationSchema := internal.Spec.Validation
	if validationSchema == nil {
		validationSchema = internal.Spec.Versions[0].Schema
	}
	s, err := structuralschema.NewStructural(validationSchema.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("structural schema: %v", err)
	}
	openAPI, _, err := schemavalidation.NewSchemaValidator(validationSchema.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("OpenAPI validator: %v", err)
	}
	return &admission{structural: s, openAPI: openAPI, validator: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// check returns the failed OpenAPI and CEL validations (empty when admitted).
func (a *admission) check(obj, old map[string]any) []string {
	defaulting.Default(obj, a.structural)
	var oldObj any
	if old != nil {
		defaulting.Default(old, a.structural)
		oldObj = old
	}
	errs := schemavalidation.ValidateCustomResource(nil, obj, a.openAPI)
	celErrs, _ := a.validator.Validate(context.Background(), nil, a.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	return msgs
}
