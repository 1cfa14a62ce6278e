package rpc

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLoggerKeepsArgsNameAndLevel(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	h := newHCLogger(base, "raft-net")

	h.Info("accepted", "peer", "10.0.0.2:7943")
	h.Named("pool").With("node", "n1").Warn("dial failed", "err", "refused")
	h.Trace("tick")
	h.SetLevel(hclog.Warn)
	h.Info("filtered out")
	if h.IsInfo() || !h.IsWarn() || h.GetLevel() != hclog.Warn {
		t.Fatalf("level checks wrong at %v", h.GetLevel())
	}
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg=accepted component=raft-net peer=10.0.0.2:7943`,
		`level=WARN msg="dial failed" component=raft-net.pool node=n1 err=refused`,
		`level=DEBUG-4 msg=tick component=raft-net`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "filtered out") {
		t.Errorf("SetLevel(Warn) let an info record through:\n%s", out)
	}
	if strings.Count(out, "component=") != 3 {
		t.Errorf("component repeated on derived loggers:\n%s", out)
	}
	h.StandardLogger(nil).Print("std line")
	if !strings.Contains(buf.String(), "std line") {
		t.Errorf("standard logger output lost:\n%s", buf.String())
	}
}
