package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func record(t *testing.T, e Event) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	New(slog.New(slog.NewJSONHandler(&buf, nil)), "n7").Record(context.Background(), e)
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("record %q: %v", buf.String(), err)
	}
	return m
}

func TestRecordCarriesTheStableKeys(t *testing.T) {
	m := record(t, Event{Name: "user.create", Actor: "root", Target: "carol", Outcome: OK,
		Attrs: []any{"grants", "produce:o*", "count", 3, slog.Bool("self", true), "err", errors.New("boom")}})
	want := map[string]any{"msg": "audit", "level": "INFO", "event": "user.create", "actor": "root", "target": "carol",
		"outcome": "ok", "node": "n7", "grants": "produce:o*", "count": float64(3), "self": true, "err": "boom"}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v (record %v)", k, m[k], v, m)
		}
	}
}

func TestRecordNeverWritesCredentialsOrOverridesKeys(t *testing.T) {
	m := record(t, Event{Name: "user.password", Actor: "a", Target: "b", Outcome: OK,
		Attrs: []any{"password", "p1", "new_password", "p2", "Cluster_Secret", "p3", "password_hash", "p4",
			"event", "forged", "actor", "forged", "outcome", "forged", "remote_user", "u"}})
	for k, v := range m {
		if s, ok := v.(string); ok && (strings.HasPrefix(s, "p") && len(s) == 2 || s == "forged") {
			t.Errorf("%s = %q was written", k, s)
		}
	}
	if m["event"] != "user.password" || m["actor"] != "a" || m["outcome"] != OK || m["remote_user"] != "u" {
		t.Errorf("record %v", m)
	}
}

func TestRecordBoundsEveryValue(t *testing.T) {
	long := strings.Repeat("x", 10*MaxValueLen)
	m := record(t, Event{Name: long, Actor: long, Target: strings.Repeat("é", MaxValueLen), Outcome: OK,
		Attrs: []any{"a", long, "b", []string{long}, long, 1}})
	for k, v := range m {
		if len(k) > MaxValueLen+len("…") {
			t.Errorf("key of %d bytes", len(k))
		}
		if s, ok := v.(string); ok && len(s) > MaxValueLen+len("…") {
			t.Errorf("%.10s: value of %d bytes", k, len(s))
		}
	}
	if !strings.HasSuffix(m["target"].(string), "…") || strings.ContainsRune(m["target"].(string), '\uFFFD') {
		t.Errorf("target cut inside a UTF-8 sequence: %q", m["target"])
	}
}

func TestNilLoggerDiscards(t *testing.T) {
	var l *Logger
	l.Record(context.Background(), Event{Name: "x"}) // must not panic
	New(nil, "n").Record(context.Background(), Event{Name: "x"})
}
