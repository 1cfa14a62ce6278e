package controller

import (
	"log/slog"
	"reflect"
	"testing"

	"narad.dev/broker/internal/audit"
)

func TestVoterChangesAreAuditedAsTheController(t *testing.T) {
	c := openCluster(t, []string{"a", "b", "c"}, "d")
	trail := &logRecorder{}
	ctl := c.start("a", nil, func(cfg *Config) { cfg.Audit = audit.New(slog.New(trail), "a") })
	settle(t, ctl, 3)
	c.kill("c")
	c.expireSilent("a", "b", "d")
	waitFor(t, "c replaced by d", func() bool { return reflect.DeepEqual(sorted(c.voters()), []string{"a", "b", "d"}) })
	waitFor(t, "the demotion audited", func() bool { return trail.index(audit.Message, "event", "cluster.voter.demote") >= 0 })
	for _, want := range []map[string]string{
		{"event": "cluster.voter.promote", "target": "d"},
		{"event": "cluster.voter.demote", "target": "c", "reason": "dead"},
	} {
		i := trail.index(audit.Message, "event", want["event"])
		if i < 0 {
			t.Fatalf("no %s record", want["event"])
		}
		got := trail.records[i].attrs
		if got["actor"] != audit.ActorController || got["outcome"] != audit.OK || got["node"] != "a" {
			t.Fatalf("%s record %v", want["event"], got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s record %v: %s = %q, want %q", want["event"], got, k, got[k], v)
			}
		}
	}
}
