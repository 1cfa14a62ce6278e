package api

import (
	"reflect"
	"testing"

	"narad.dev/broker/internal/controller"
)

// A forced decommission: the body is parsed strictly (400 for bad JSON, lose without force,
// force with dry_run, a bad topic or partition) before the backend is called; the backend's
// forced answer is 200 with exactly the lost partitions, and its refusal a 409 with the
// missing partitions it named.
func TestForcedDecommissionBodyAndAnswers(t *testing.T) {
	fc := &fakeCluster{}
	env := newEnv(t, func(o *Options) { o.Cluster = fc })
	const path = "/v1/cluster/members/n3/decommission"

	expectStatus(t, env.do("POST", path, "bob", []byte(`{"force":true}`)), 403)
	for _, bad := range []string{
		`{"force":"yes"}`, `{"force":true,"extra":1}`, `{"lose":[{"topic":"t","partition":0}]}`,
		`{"force":true,"lose":[{"topic":"","partition":0}]}`, `{"force":true,"lose":[{"topic":"t"}]}`,
		`{"force":true,"lose":[{"topic":"t","partition":-1}]}`, `{"force":true,"lose":[{"topic":"t","partition":2147483648}]}`,
		`{"force":true} {}`, `[`,
	} {
		rec := env.do("POST", path, "ops", []byte(bad))
		expectStatus(t, rec, 400)
		expectJSONError(t, rec)
	}
	expectStatus(t, env.do("POST", path+"?dry_run=true", "ops", []byte(`{"force":true}`)), 400)
	if len(fc.decoms) != 0 {
		t.Fatalf("bad requests reached the backend: %+v", fc.decoms)
	}

	lost := []controller.LostPartition{{Topic: "t", Partition: 0, Owner: "n3", NewOwner: "n1", LeaderEpoch: 2}}
	fc.decomRes = DecommissionResult{Forced: true, Verdict: controller.Verdict{Node: "n3", Allowed: true, Lost: lost}}
	rec := env.do("POST", path, "ops", []byte(`{"force":true,"lose":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}`))
	want := `{"forced":true,"lost":[{"topic":"t","partition":0,"owner":"n3","new_owner":"n1","leader_epoch":2,"restarts_at":0}],"node":"n3"}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Fatalf("forced: %d %s, want 200 %s", rec.Code, rec.Body.String(), want)
	}
	fc.decomRes = DecommissionResult{Forced: true, Verdict: controller.Verdict{Node: "n3", Allowed: true}}
	if rec := env.do("POST", path, "ops", []byte(`{"force":true}`)); rec.Code != 200 ||
		rec.Body.String() != `{"forced":true,"lost":[],"node":"n3"}`+"\n" {
		t.Fatalf("forced with nothing to lose: %d %s", rec.Code, rec.Body.String())
	}
	missing := []controller.PartitionRef{{Topic: "t", Partition: 1}}
	fc.decomErr = &ClusterError{Kind: ErrConflict, Msg: "refused", Fields: map[string]any{"node": "n3",
		"reasons": []string{controller.ReasonDeadOwner}, "missing": missing}}
	body := expectJSONError(t, env.do("POST", path, "ops", []byte(`{"force":true,"lose":[]}`)))
	if m, _ := body["missing"].([]any); len(m) != 1 || !reflect.DeepEqual(m[0], map[string]any{"topic": "t", "partition": 1.0}) ||
		!reflect.DeepEqual(body["reasons"], []any{controller.ReasonDeadOwner}) {
		t.Fatalf("409 body %v, want missing t/1", body)
	}
	// A plain body without force is a plain decommission.
	fc.decomErr, fc.decomRes = nil, DecommissionResult{}
	expectStatus(t, env.do("POST", path, "ops", []byte(`{"force":false}`)), 204)

	wantCalls := []DecommissionRequest{
		{ID: "n3", Force: &ForceDecommission{Lose: []controller.PartitionRef{{Topic: "t"}, {Topic: "t"}}}},
		{ID: "n3", Force: &ForceDecommission{Lose: []controller.PartitionRef{}}},
		{ID: "n3", Force: &ForceDecommission{Lose: []controller.PartitionRef{}}},
		{ID: "n3"},
	}
	if !reflect.DeepEqual(fc.decoms, wantCalls) {
		t.Fatalf("backend calls %+v, want %+v", fc.decoms, wantCalls)
	}
}

func FuzzDecommissionBody(f *testing.F) {
	for _, s := range []string{"", "{}", `{"force":true}`, `{"force":true,"lose":[{"topic":"t","partition":3}]}`,
		`{"lose":[]}`, `{"force":true,"lose":[{"topic":"a b","partition":1}]}`, `{"force":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fd, err := parseDecommissionBody(b)
		if err != nil || fd == nil {
			if err == nil && fd != nil {
				t.Fatalf("%q: nil error with %+v", b, fd)
			}
			return
		}
		for _, r := range fd.Lose {
			if !validTopicName(r.Topic) || r.Partition < 0 {
				t.Fatalf("%q accepted %+v", b, r)
			}
		}
	})
}
