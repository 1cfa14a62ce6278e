package server

import (
	"strings"
	"testing"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
)

func TestClusterEndpointsAuditActorTargetAndOutcome(t *testing.T) {
	f := newClusterFixture(t)
	if status, _ := f.do(t, "POST", "/v1/cluster/members/n4/decommission"); status != 204 {
		t.Fatalf("decommission: %d", status)
	}
	f.caller = &meta.User{Username: "bob"}
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 403 {
		t.Fatalf("non-admin cancel: %d", status)
	}
	if status, _ := f.do(t, "POST", "/v1/cluster/moves/orders/1/abort"); status != 403 {
		t.Fatalf("non-admin abort: %d", status)
	}
	f.caller = rootCallerOff()
	if status, _ := f.do(t, "DELETE", "/v1/cluster/members/n4/decommission"); status != 204 {
		t.Fatalf("cancel with security off: %d", status)
	}
	want := []string{
		"cluster.decommission root n4 ok",
		"cluster.decommission.cancel bob n4 denied",
		"cluster.move.abort bob orders/1 denied",
		"cluster.decommission.cancel " + audit.ActorSecurityOff + " n4 ok",
	}
	var got []string
	for _, a := range f.audits(t) {
		got = append(got, strings.Join([]string{a["event"].(string), a["actor"].(string), a["target"].(string), a["outcome"].(string)}, " "))
		if a["node"] != "n1" || a["client"] == "" || a["client"] == nil {
			t.Errorf("record %v lacks node or client", a)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// rootCallerOff is the caller the API hands the cluster endpoints when security is off.
func rootCallerOff() *meta.User {
	return &meta.User{Root: true, Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
}
