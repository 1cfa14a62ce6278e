package meta

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Raft's chatter below warn never reaches the service log; warnings keep their attributes.
func TestRaftLogsBelowWarnAreDropped(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newHCLogAdapter(l, "raft", hclog.Warn)
	a.Info("entering follower state", "term", 3)
	a.Debug("votes", "needed", 1)
	a.Named("snap").With("id", "x").Warn("heartbeat timeout reached", "last-leader", hclog.Fmt("%s-%d", "n", 1))
	a.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("transport broke")
	out := buf.String()
	if strings.Contains(out, "follower") || strings.Contains(out, "votes") {
		t.Fatalf("info/debug records leaked: %s", out)
	}
	for _, want := range []string{"level=WARN", "component=raft.snap", "id=x", "last-leader=n-1", "level=ERROR", "transport broke"} {
		if !strings.Contains(out, want) {
			t.Fatalf("missing %q in %s", want, out)
		}
	}
}
