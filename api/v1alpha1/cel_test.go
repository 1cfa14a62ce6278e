package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/json"
)

// obj builds an unstructured object from JSON as the API server decodes a request body
// (integers as int64, which CEL needs).
func obj(t *testing.T, kind, spec string) map[string]any {
	t.Helper()
	var m map[string]any
	doc := `{"apiVersion":"narad.dev/v1alpha1","kind":"` + kind + `","metadata":{"name":"x","namespace":"ns"},"spec":` + spec + `}`
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", doc, err)
	}
	return m
}

type celCase struct {
	name     string
	old, new string // specs as JSON; old "" means create
	reject   string // substring of the expected failure; "" means admitted
}

func runCELCases(t *testing.T, plural, kind string, cases []celCase) {
	t.Helper()
	a := newAdmission(t, plural)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var old map[string]any
			if tc.old != "" {
				old = obj(t, kind, tc.old)
			}
			msgs := a.check(obj(t, kind, tc.new), old)
			switch {
			case tc.reject == "" && len(msgs) > 0:
				t.Fatalf("refused: %v", msgs)
			case tc.reject != "" && !strings.Contains(strings.Join(msgs, "\n"), tc.reject):
				t.Fatalf("want a refusal containing %q, got %v", tc.reject, msgs)
			}
		})
	}
}

func TestNaradClusterCELRules(t *testing.T) {
	runCELCases(t, "naradclusters", "NaradCluster", []celCase{
		{name: "empty spec is defaulted to a valid 3-node cluster", new: `{}`},
		{name: "create below initialClusterSize", new: `{"replicas":1}`, reject: "at least initialClusterSize"},
		{name: "create a single-node cluster", new: `{"replicas":1,"initialClusterSize":1}`},
		{name: "scale below initialClusterSize after creation is left to the brokers", old: `{"replicas":3}`, new: `{"replicas":2}`},
		{name: "even initialClusterSize", new: `{"replicas":4,"initialClusterSize":4}`, reject: "must be odd"},
		{name: "initialClusterSize changed", old: `{"replicas":5,"initialClusterSize":3}`, new: `{"replicas":5,"initialClusterSize":5}`, reject: "initialClusterSize is immutable"},
		{name: "initialClusterSize dropped resets to the default and is refused", old: `{"replicas":5,"initialClusterSize":5}`, new: `{"replicas":5}`, reject: "initialClusterSize is immutable"},
		{name: "tls with both sources", new: `{"tls":{"secretName":"s","certManager":{"issuerRef":{"name":"ca"}}}}`, reject: "at most one"},
		{name: "tls from a secret", new: `{"tls":{"secretName":"s"}}`},
		{name: "tls from cert-manager", new: `{"tls":{"certManager":{"issuerRef":{"name":"ca"}}}}`},
		{name: "default partitions above the maximum", new: `{"broker":{"defaultPartitions":12,"maxPartitions":6}}`, reject: "must not exceed maxPartitions"},
		{name: "retention under an hour", new: `{"broker":{"retentionMs":1000}}`, reject: "at least 3600000"},
		{name: "retention forever", new: `{"broker":{"retentionMs":0}}`},
		{name: "zero replicas", old: `{"replicas":3}`, new: `{"replicas":0}`, reject: "should be greater than or equal to 1"},
		{name: "unknown pull policy", new: `{"imagePullPolicy":"Sometimes"}`, reject: "Unsupported value"},
		{name: "unknown PVC policy", new: `{"storage":{"pvcRetentionOnScaleDown":"Archive"}}`, reject: "Unsupported value"},
		{name: "unknown volume-loss policy", new: `{"storage":{"onVolumeLoss":"Delete"}}`, reject: "Unsupported value"},
		{name: "volume loss recreates", new: `{"storage":{"onVolumeLoss":"Recreate"}}`},
		{name: "topic defaults R3 M2", new: `{"topicDefaults":{"replicationFactor":3,"minInSyncReplicas":2}}`},
		{name: "topic defaults M equal to R", new: `{"topicDefaults":{"replicationFactor":2,"minInSyncReplicas":2}}`},
		{name: "topic defaults M alone", new: `{"topicDefaults":{"minInSyncReplicas":2}}`},
		{name: "topic defaults M above R", new: `{"topicDefaults":{"replicationFactor":2,"minInSyncReplicas":3}}`, reject: "minInSyncReplicas must not exceed replicationFactor"},
		{name: "topic defaults R0", new: `{"topicDefaults":{"replicationFactor":0}}`, reject: "should be greater than or equal to 1"},
		{name: "topic defaults R6", new: `{"topicDefaults":{"replicationFactor":6}}`, reject: "should be less than or equal to 5"},
		{name: "topic defaults M0", new: `{"topicDefaults":{"minInSyncReplicas":0}}`, reject: "should be greater than or equal to 1"},
		{name: "storage grows", old: `{"storage":{"size":"10Gi"}}`, new: `{"storage":{"size":"20Gi"}}`},
		{name: "storage grows across units", old: `{"storage":{"size":"1000Mi"}}`, new: `{"storage":{"size":"1Gi"}}`},
		{name: "storage unchanged in other units", old: `{"storage":{"size":"1Gi"}}`, new: `{"storage":{"size":"1024Mi"}}`},
		{name: "storage shrinks", old: `{"storage":{"size":"20Gi"}}`, new: `{"storage":{"size":"10Gi"}}`, reject: "storage.size may not shrink"},
		{name: "storage shrinks across units", old: `{"storage":{"size":"1Gi"}}`, new: `{"storage":{"size":"1000Mi"}}`, reject: "storage.size may not shrink"},
		{name: "storage size dropped falls back to 10Gi and is refused", old: `{"storage":{"size":"50Gi"}}`, new: `{"storage":{}}`, reject: "storage.size may not shrink"},
		{name: "storage size as a plain number grows", old: `{"storage":{"size":1000}}`, new: `{"storage":{"size":"1Ki"}}`},
	})
}

func TestTopicCELRules(t *testing.T) {
	const base = `"clusterRef":{"name":"narad"}`
	runCELCases(t, "topics", "Topic", []celCase{
		{name: "minimal topic", new: `{` + base + `}`},
		{name: "partitions grow", old: `{` + base + `,"partitions":4}`, new: `{` + base + `,"partitions":6}`},
		{name: "partitions shrink", old: `{` + base + `,"partitions":6}`, new: `{` + base + `,"partitions":4}`, reject: "partitions may not decrease"},
		{name: "partitions dropped falls back to 3 and is refused", old: `{` + base + `,"partitions":6}`, new: `{` + base + `}`, reject: "partitions may not decrease"},
		{name: "name set by the controller", old: `{` + base + `}`, new: `{` + base + `,"name":"orders"}`},
		{name: "name changed", old: `{` + base + `,"name":"orders"}`, new: `{` + base + `,"name":"payments"}`, reject: "name is immutable once set"},
		{name: "name cleared", old: `{` + base + `,"name":"orders"}`, new: `{` + base + `}`, reject: "name is immutable once set"},
		{name: "name dot-dot", new: `{` + base + `,"name":".."}`, reject: "must not be '.' or '..'"},
		{name: "cluster changed", old: `{` + base + `}`, new: `{"clusterRef":{"name":"other"}}`, reject: "clusterRef is immutable"},
		{name: "retention under an hour", new: `{` + base + `,"retentionMs":59000}`, reject: "at least 3600000"},
		{name: "retention of a day", new: `{` + base + `,"retentionMs":86400000}`},
		{name: "two partitions", new: `{` + base + `,"partitions":2}`, reject: "should be greater than or equal to 3"},
		{name: "109 partitions", new: `{` + base + `,"partitions":109}`, reject: "should be less than or equal to 108"},
		{name: "name with a slash", new: `{` + base + `,"name":"a/b"}`, reject: "should match"},
		{name: "name of 256 characters", new: `{` + base + `,"name":"` + strings.Repeat("a", 256) + `"}`, reject: "may not be more than 255"},
		{name: "schema is any JSON document", new: `{` + base + `,"schema":{"type":"object","properties":{"id":{"type":"string"}}}}`},
		{name: "unknown deletion policy", new: `{` + base + `,"deletionPolicy":"Orphan"}`, reject: "Unsupported value"},
		{name: "no cluster", new: `{}`, reject: "clusterRef"},
		{name: "replicated R3 M2", new: `{` + base + `,"replicationFactor":3,"minInSyncReplicas":2}`},
		{name: "replication factor raised", old: `{` + base + `,"replicationFactor":2}`, new: `{` + base + `,"replicationFactor":3}`},
		{name: "replication factor lowered", old: `{` + base + `,"replicationFactor":3}`, new: `{` + base + `,"replicationFactor":2}`},
		{name: "M above R", new: `{` + base + `,"replicationFactor":2,"minInSyncReplicas":3}`, reject: "minInSyncReplicas must not exceed replicationFactor"},
		{name: "M alone", new: `{` + base + `,"minInSyncReplicas":2}`},
		{name: "R above 5", new: `{` + base + `,"replicationFactor":6}`, reject: "should be less than or equal to 5"},
		{name: "R zero", new: `{` + base + `,"replicationFactor":0}`, reject: "should be greater than or equal to 1"},
		{name: "M zero", new: `{` + base + `,"minInSyncReplicas":0}`, reject: "should be greater than or equal to 1"},
	})
}

func TestFanoutLinkCELRules(t *testing.T) {
	const base = `"clusterRef":{"name":"narad"},"parent":"orders","child":"audit"`
	runCELCases(t, "fanoutlinks", "FanoutLink", []celCase{
		{name: "minimal link", new: `{` + base + `}`},
		{name: "parent is the child", new: `{"clusterRef":{"name":"narad"},"parent":"a","child":"a"}`, reject: "parent and child must differ"},
		{name: "delay changed", old: `{` + base + `,"delayMs":1000}`, new: `{` + base + `,"delayMs":2000}`, reject: "delayMs is immutable"},
		{name: "delay dropped resets to 0 and is refused", old: `{` + base + `,"delayMs":1000}`, new: `{` + base + `}`, reject: "delayMs is immutable"},
		{name: "delay unchanged", old: `{` + base + `,"delayMs":1000}`, new: `{` + base + `,"delayMs":1000}`},
		{name: "child changed", old: `{` + base + `}`, new: `{"clusterRef":{"name":"narad"},"parent":"orders","child":"other"}`, reject: "child is immutable"},
		{name: "parent changed", old: `{` + base + `}`, new: `{"clusterRef":{"name":"narad"},"parent":"other","child":"audit"}`, reject: "parent is immutable"},
		{name: "childPartitions without createChild", new: `{` + base + `,"childPartitions":6}`, reject: "only used with createChild"},
		{name: "childPartitions with createChild", new: `{` + base + `,"createChild":true,"childPartitions":6}`},
		{name: "delay of a year", new: `{` + base + `,"delayMs":31536000000}`},
		{name: "delay over a year", new: `{` + base + `,"delayMs":31536000001}`, reject: "should be less than or equal to 31536000000"},
		{name: "negative delay", new: `{` + base + `,"delayMs":-1}`, reject: "should be greater than or equal to 0"},
	})
}

func TestRemoteFanoutLinkCELRules(t *testing.T) {
	const (
		base      = `"clusterRef":{"name":"narad"},"parent":"orders"`
		byCluster = `"remote":{"clusterRef":{"name":"dr","namespace":"backup"},"topic":"orders"}`
		byURL     = `"remote":{"url":"http://a.example:7942,https://b.example:7942","topic":"orders","credentialsSecretRef":{"name":"dr-writer"}}`
	)
	runCELCases(t, "fanoutlinks", "FanoutLink", []celCase{
		{name: "remote by cluster", new: `{` + base + `,` + byCluster + `}`},
		{name: "remote by url with credentials", new: `{` + base + `,` + byURL + `}`},
		{name: "remote with every start mode", new: `{` + base + `,"remote":{"url":"http://a:7942","topic":"t","start":"consumer_frontier"}}`},
		{name: "child and remote both set", new: `{` + base + `,"child":"audit",` + byCluster + `}`, reject: "exactly one of child and remote"},
		{name: "neither child nor remote", new: `{` + base + `}`, reject: "exactly one of child and remote"},
		{name: "remote with createChild", new: `{` + base + `,"createChild":true,` + byCluster + `}`, reject: "createChild is not used with remote"},
		{name: "remote with clusterRef and url", new: `{` + base + `,"remote":{"clusterRef":{"name":"dr"},"url":"http://a:7942","topic":"t"}}`, reject: "exactly one of clusterRef and url"},
		{name: "remote with neither clusterRef nor url", new: `{` + base + `,"remote":{"topic":"t"}}`, reject: "exactly one of clusterRef and url"},
		{name: "remote without a topic", new: `{` + base + `,"remote":{"url":"http://a:7942"}}`, reject: "topic"},
		{name: "remote topic dot-dot", new: `{` + base + `,"remote":{"url":"http://a:7942","topic":".."}}`, reject: "must not be '.' or '..'"},
		{name: "url with a path", new: `{` + base + `,"remote":{"url":"http://a:7942/v1","topic":"t"}}`, reject: "should match"},
		{name: "url without a scheme", new: `{` + base + `,"remote":{"url":"a:7942","topic":"t"}}`, reject: "should match"},
		{name: "unknown start mode", new: `{` + base + `,"remote":{"url":"http://a:7942","topic":"t","start":"newest"}}`, reject: "Unsupported value"},
		{name: "remote target changed", old: `{` + base + `,` + byCluster + `}`, new: `{` + base + `,"remote":{"clusterRef":{"name":"dr2","namespace":"backup"},"topic":"orders"}}`, reject: "remote is immutable"},
		{name: "remote credentials changed", old: `{` + base + `,` + byURL + `}`, new: `{` + base + `,"remote":{"url":"http://a.example:7942,https://b.example:7942","topic":"orders","credentialsSecretRef":{"name":"other"}}}`, reject: "remote is immutable"},
		{name: "remote unchanged", old: `{` + base + `,` + byURL + `}`, new: `{` + base + `,` + byURL + `}`},
		{name: "local link turned remote", old: `{` + base + `,"child":"audit"}`, new: `{` + base + `,` + byCluster + `}`, reject: "cannot switch between child and remote"},
		{name: "remote link turned local", old: `{` + base + `,` + byCluster + `}`, new: `{` + base + `,"child":"audit"}`, reject: "cannot switch between child and remote"},
	})
}

// TestRemoteDefaults: start and the credential keys default to the documented values, so the
// operator never sees them empty.
func TestRemoteDefaults(t *testing.T) {
	a := newAdmission(t, "fanoutlinks")
	o := obj(t, "FanoutLink", `{"clusterRef":{"name":"narad"},"parent":"orders","remote":{"url":"http://a:7942","topic":"t","credentialsSecretRef":{"name":"s"}}}`)
	if msgs := a.check(o, nil); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	remote := o["spec"].(map[string]any)["remote"].(map[string]any)
	creds := remote["credentialsSecretRef"].(map[string]any)
	for field, got := range map[string]any{"start": remote["start"], "userKey": creds["userKey"], "passwordKey": creds["passwordKey"]} {
		want := map[string]string{"start": "attach", "userKey": "username", "passwordKey": "password"}[field]
		if got != want {
			t.Errorf("%s defaulted to %v, want %q", field, got, want)
		}
	}
}

// TestDefaultsFillAnEmptyCluster: an empty spec must come out as the documented defaults, or
// the operator would see zero replicas and no storage size.
func TestDefaultsFillAnEmptyCluster(t *testing.T) {
	a := newAdmission(t, "naradclusters")
	o := obj(t, "NaradCluster", `{}`)
	if msgs := a.check(o, nil); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	spec := o["spec"].(map[string]any)
	storage, _ := spec["storage"].(map[string]any)
	for _, tc := range []struct {
		field string
		got   any
		want  any
	}{
		{"replicas", spec["replicas"], int64(3)},
		{"initialClusterSize", spec["initialClusterSize"], int64(3)},
		{"storage.size", storage["size"], "10Gi"},
		{"storage.pvcRetentionOnScaleDown", storage["pvcRetentionOnScaleDown"], "Retain"},
		{"storage.onVolumeLoss", storage["onVolumeLoss"], "Wait"},
	} {
		if !equalNumberOrString(tc.got, tc.want) {
			t.Errorf("%s defaulted to %v (%T), want %v", tc.field, tc.got, tc.got, tc.want)
		}
	}
}

func equalNumberOrString(got, want any) bool {
	switch g := got.(type) {
	case float64:
		w, ok := want.(int64)
		return ok && g == float64(w)
	case int64:
		return g == want
	default:
		return got == want
	}
}
