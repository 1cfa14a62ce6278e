package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fullUser() *NaradUser {
	return &NaradUser{
		TypeMeta:   metav1.TypeMeta{APIVersion: "narad.dev/v1alpha1", Kind: "NaradUser"},
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: "prod"},
		Spec: NaradUserSpec{
			ClusterRef: ClusterReference{Name: "narad"},
			Username:   "svc-writer",
			Grants: []UserGrant{
				{Action: GrantProduce, Patterns: []string{"orders", "audit-*"}},
				{Action: GrantAdmin},
			},
			PasswordSecretRef: &PasswordSecretReference{Name: "pw", Key: "secret"},
		},
		Status: NaradUserStatus{
			ObservedGeneration: 3, Username: "svc-writer", SecretName: "pw", PasswordSecretVersion: "uid/42",
			Conditions: []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled"}},
		},
	}
}

// TestNaradUserWireNames pins the field names users write in YAML and read from status.
func TestNaradUserWireNames(t *testing.T) {
	data, err := json.Marshal(fullUser())
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec   map[string]json.RawMessage `json:"spec"`
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"clusterRef", "username", "grants", "passwordSecretRef"} {
		if _, ok := m.Spec[k]; !ok {
			t.Errorf("spec has no %q: %s", k, data)
		}
	}
	for _, k := range []string{"observedGeneration", "conditions", "username", "secretName", "passwordSecretVersion"} {
		if _, ok := m.Status[k]; !ok {
			t.Errorf("status has no %q: %s", k, data)
		}
	}
	var back NaradUser
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fullUser(), &back) {
		t.Fatalf("round trip changed the object:\nwant %#v\n got %#v", fullUser(), &back)
	}
}

// TestNaradUserDeepCopyIsIndependent: a copy shares no grant list, pattern or reference.
func TestNaradUserDeepCopyIsIndependent(t *testing.T) {
	u := fullUser()
	c := u.DeepCopy()
	c.Spec.Grants[0].Patterns[0] = "changed"
	c.Spec.PasswordSecretRef.Name = "changed"
	c.Spec.Grants = append(c.Spec.Grants, UserGrant{Action: GrantCreate})
	if u.Spec.Grants[0].Patterns[0] != "orders" || u.Spec.PasswordSecretRef.Name != "pw" || len(u.Spec.Grants) != 2 {
		t.Fatalf("the copy shares state with the original: %+v", u.Spec)
	}
	if got := u.BrokerUsername(); got != "svc-writer" {
		t.Fatalf("BrokerUsername = %q", got)
	}
	u.Spec.Username = ""
	if got := u.BrokerUsername(); got != "writer" {
		t.Fatalf("BrokerUsername without spec.username = %q, want metadata.name", got)
	}
}
