package fanoutlink

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	naradv1 "narad.dev/api/v1alpha1"
	"narad.dev/broker/client"
	"narad.dev/operator/brokers"
)

func TestRemoteIDIsTheBrokersIDOfTheFirstURL(t *testing.T) {
	for _, tc := range []struct{ urls, topic, want string }{
		{"http://127.0.0.53:7942", "orders", "remote:orders@127.0.0.53:7942"},
		{"https://dr.backup.svc:7942/,http://b:1", "t", "remote:t@dr.backup.svc:7942"},
		{" http://a:1 , http://b:2", "t", "remote:t@a:1"},
	} {
		if got, err := remoteID(tc.urls, tc.topic); err != nil || got != tc.want {
			t.Errorf("remoteID(%q, %q) = %q, %v; want %q", tc.urls, tc.topic, got, err, tc.want)
		}
	}
	if _, err := remoteID("", "t"); err == nil {
		t.Error("an empty URL list must not make an id")
	}
}

func TestTargetReasonReadsOnlyTargetCheckRefusals(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{&client.Error{Status: 422, Reason: "unauthorized", Message: "remote target check failed: unauthorized"}, "unauthorized"},
		{fmt.Errorf("attach: %w", &client.Error{Status: 422, Reason: "target_topic_missing"}), "target_topic_missing"},
		{&client.Error{Status: 422, Reason: "target_is_delay_child"}, "target_is_delay_child"},
		{&client.Error{Status: 400, Reason: "unauthorized"}, ""},
		{&client.Error{Status: 422, Message: "delay exceeds the parent's retention"}, ""},
		{&client.Error{Status: 422, Reason: "Not A Code"}, ""},
		{nil, ""},
	} {
		reason, ok := targetReason(tc.err)
		if ok != (tc.reason != "") || reason != tc.reason {
			t.Errorf("targetReason(%v) = %q, %v; want %q", tc.err, reason, ok, tc.reason)
		}
	}
}

func TestRecoveryPointDecodesThePartitionMap(t *testing.T) {
	if got := recoveryPoint(json.RawMessage(`{"0":12,"2":7}`)); !reflect.DeepEqual(got, map[string]int64{"0": 12, "2": 7}) {
		t.Fatalf("got %v", got)
	}
	for _, raw := range []string{``, `{}`, `null`, `[1,2]`, `{"0":"x"}`} {
		if got := recoveryPoint(json.RawMessage(raw)); got != nil {
			t.Errorf("recoveryPoint(%q) = %v, want nil", raw, got)
		}
	}
}

func TestSameRemoteLinkRefusesAnotherDelay(t *testing.T) {
	spec := naradv1.FanoutLinkSpec{Parent: "p", DelayMs: 1000, Remote: &naradv1.FanoutRemote{URL: "http://a:1", Topic: "t"}}
	if ok, _, _ := sameRemoteLink(spec, client.ChildLink{ID: "remote:t@a:1", DelayMs: 1000, Start: "oldest"}); !ok {
		t.Fatal("same delay must be adopted, whatever the start mode was")
	}
	if ok, reason, _ := sameRemoteLink(spec, client.ChildLink{ID: "remote:t@a:1"}); ok || reason != "DelayMismatch" {
		t.Fatalf("other delay: ok %v reason %q", ok, reason)
	}
}

func TestFindRemoteMatchesRemoteEntriesByID(t *testing.T) {
	kids := &client.ChildList{Children: []client.ChildLink{
		{Name: "remote:t@a:1", Link: "local"}, // a local child cannot be named so; never matched
		{Name: "remote:http://a:1/t", ID: "remote:t@a:1", Link: "remote", Kind: "remote", DelayMs: 5},
	}}
	if l := findRemote(kids, "remote:t@a:1"); l == nil || l.DelayMs != 5 {
		t.Fatalf("found %+v", l)
	}
	if l := findRemote(kids, "remote:u@a:1"); l != nil {
		t.Fatalf("found %+v for another target", l)
	}
}

func TestRemoteStatusShowsATroubledLinkAsDegraded(t *testing.T) {
	for _, tc := range []struct {
		state         string
		ready, degrad metav1.ConditionStatus
	}{
		{"active", metav1.ConditionTrue, metav1.ConditionFalse},
		{"incomplete", metav1.ConditionTrue, metav1.ConditionFalse},
		{"unauthorized", metav1.ConditionFalse, metav1.ConditionTrue},
		{"target_unreachable", metav1.ConditionFalse, metav1.ConditionTrue},
		{"rejected", metav1.ConditionFalse, metav1.ConditionTrue},
	} {
		fl := &naradv1.FanoutLink{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
		st := newStatus(fl)
		st.attachedRemote(client.ChildLink{ID: "remote:t@a:1", AttachEpoch: "e", State: tc.state, LastError: "boom",
			LagMessages: 4, RecoveryPoint: json.RawMessage(`{"0":1}`)}, "http://a:1")
		st.settle()
		s := fl.Status
		if s.State != naradv1.FanoutLinkAttached || s.LinkID != "remote:t@a:1" || s.RemoteState != tc.state ||
			s.TargetURL != "http://a:1" || s.Lag != 4 || s.RecoveryPoint["0"] != 1 || s.LastError != "boom" {
			t.Errorf("%s: status %+v", tc.state, s)
		}
		ready, degraded := s.Conditions[0], s.Conditions[1]
		if ready.Status != tc.ready || degraded.Status != tc.degrad {
			t.Errorf("%s: Ready %s Degraded %s", tc.state, ready.Status, degraded.Status)
		}
		if tc.degrad == metav1.ConditionTrue && degraded.Reason != tc.state {
			t.Errorf("%s: Degraded reason %q", tc.state, degraded.Reason)
		}

		// A later refusal clears what the brokers held.
		st = newStatus(fl)
		st.failed("unauthorized", "x")
		st.settle()
		if fl.Status.LinkID != "" || fl.Status.RecoveryPoint != nil || fl.Status.RemoteState != "" {
			t.Errorf("%s: Failed kept the remote fields: %+v", tc.state, fl.Status)
		}
	}
}

func TestClusterURLUsesTheServiceInKubernetesAndTheOrdinalsElsewhere(t *testing.T) {
	nc := &naradv1.NaradCluster{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: "backup"},
		Spec: naradv1.NaradClusterSpec{Replicas: 10}}
	if got := clusterURL(brokers.DNSResolver{}, nc); got != "http://dr.backup.svc:7942" {
		t.Errorf("DNS: %q", got)
	}
	nc.Spec.TLS = &naradv1.TLSSpec{SecretName: "certs"}
	if got := clusterURL(&brokers.DNSResolver{}, nc); got != "https://dr.backup.svc:7942" {
		t.Errorf("DNS with TLS: %q", got)
	}
	byOrdinal := brokers.ResolverFunc(func(_ *naradv1.NaradCluster, i int32) string { return fmt.Sprintf("http://127.0.0.%d:1", i+1) })
	want := "http://127.0.0.1:1,http://127.0.0.2:1,http://127.0.0.3:1,http://127.0.0.4:1," +
		"http://127.0.0.5:1,http://127.0.0.6:1,http://127.0.0.7:1,http://127.0.0.8:1"
	if got := clusterURL(byOrdinal, nc); got != want {
		t.Errorf("ordinals (at most %d): %q", maxTargetURLs, got)
	}
	nc.Status.Replicas = 2
	if got := clusterURL(byOrdinal, nc); got != "http://127.0.0.1:1,http://127.0.0.2:1" {
		t.Errorf("status.replicas: %q", got)
	}
}
