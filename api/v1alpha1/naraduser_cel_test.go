package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/json"
)

func TestNaradUserCELRules(t *testing.T) {
	const base = `"clusterRef":{"name":"narad"}`
	runCELCases(t, "naradusers", "NaradUser", []celCase{
		{name: "minimal user", new: `{` + base + `}`},
		{name: "every action", new: `{` + base + `,"username":"svc.orders_1-a","grants":[{"action":"produce","patterns":["orders"]},{"action":"consume","patterns":["orders-*","*"]},{"action":"create","patterns":["tmp-*"]},{"action":"admin"}]}`},
		{name: "with a password secret", new: `{` + base + `,"passwordSecretRef":{"name":"pw"}}`},
		{name: "admin with patterns", new: `{` + base + `,"grants":[{"action":"admin","patterns":["x"]}]}`, reject: "admin takes no patterns"},
		{name: "produce without patterns", new: `{` + base + `,"grants":[{"action":"produce"}]}`, reject: "need at least one"},
		{name: "consume with an empty list", new: `{` + base + `,"grants":[{"action":"consume","patterns":[]}]}`, reject: "need at least one"},
		{name: "unknown action", new: `{` + base + `,"grants":[{"action":"read","patterns":["x"]}]}`, reject: "Unsupported value"},
		{name: "star inside a pattern", new: `{` + base + `,"grants":[{"action":"produce","patterns":["a*b"]}]}`, reject: "should match"},
		{name: "empty pattern", new: `{` + base + `,"grants":[{"action":"produce","patterns":[""]}]}`, reject: "spec.grants[0].patterns[0]"},
		{name: "pattern of 255 characters and a star", new: `{` + base + `,"grants":[{"action":"produce","patterns":["` + strings.Repeat("p", 255) + `*"]}]}`},
		{name: "pattern of 256 name characters", new: `{` + base + `,"grants":[{"action":"produce","patterns":["` + strings.Repeat("p", 256) + `"]}]}`, reject: "should match"},
		{name: "username of 65 characters", new: `{` + base + `,"username":"` + strings.Repeat("u", 65) + `"}`, reject: "spec.username"},
		{name: "username with a slash", new: `{` + base + `,"username":"a/b"}`, reject: "should match"},
		{name: "username changed", old: `{` + base + `,"username":"a"}`, new: `{` + base + `,"username":"b"}`, reject: "username is immutable once set"},
		{name: "username dropped", old: `{` + base + `,"username":"a"}`, new: `{` + base + `}`, reject: "username is immutable once set"},
		{name: "username written back", old: `{` + base + `}`, new: `{` + base + `,"username":"x"}`},
		{name: "cluster changed", old: `{` + base + `}`, new: `{"clusterRef":{"name":"other"}}`, reject: "clusterRef is immutable"},
		{name: "root admin by username", new: `{` + base + `,"username":"admin"}`, reject: "the root admin cannot be a NaradUser"},
	})
}

// TestNaradUserNameRules: the rules on metadata.name (the root admin, a name too long to be
// a username or to name the generated Secret).
func TestNaradUserNameRules(t *testing.T) {
	a := newAdmission(t, "naradusers")
	for _, tc := range []struct {
		name, spec, reject string
	}{
		{"admin", `{"clusterRef":{"name":"narad"}}`, "the root admin cannot be a NaradUser"},
		{"admin", `{"clusterRef":{"name":"narad"},"username":"ops"}`, ""},
		{strings.Repeat("n", 65), `{"clusterRef":{"name":"narad"}}`, "needs spec.username"},
		{strings.Repeat("n", 65), `{"clusterRef":{"name":"narad"},"username":"n"}`, ""},
		{strings.Repeat("n", 243), `{"clusterRef":{"name":"narad"},"username":"n"}`, "at most 242 characters"},
	} {
		var o map[string]any
		doc := `{"apiVersion":"narad.dev/v1alpha1","kind":"NaradUser","metadata":{"name":"` + tc.name + `","namespace":"ns"},"spec":` + tc.spec + `}`
		if err := json.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		msgs := strings.Join(a.check(o, nil), "\n")
		switch {
		case tc.reject == "" && msgs != "":
			t.Errorf("name %.10s… spec %s refused: %s", tc.name, tc.spec, msgs)
		case tc.reject != "" && !strings.Contains(msgs, tc.reject):
			t.Errorf("name %.10s… spec %s: want a refusal containing %q, got %q", tc.name, tc.spec, tc.reject, msgs)
		}
	}
}

// TestPasswordSecretKeyDefaults: the key of spec.passwordSecretRef defaults to "password", the
// key the generated Secret uses.
func TestPasswordSecretKeyDefaults(t *testing.T) {
	a := newAdmission(t, "naradusers")
	o := obj(t, "NaradUser", `{"clusterRef":{"name":"narad"},"passwordSecretRef":{"name":"s"}}`)
	if msgs := a.check(o, nil); len(msgs) > 0 {
		t.Fatalf("refused: %v", msgs)
	}
	ref := o["spec"].(map[string]any)["passwordSecretRef"].(map[string]any)
	if ref["key"] != UserSecretPasswordKey {
		t.Fatalf("key defaulted to %v, want %q", ref["key"], UserSecretPasswordKey)
	}
}
