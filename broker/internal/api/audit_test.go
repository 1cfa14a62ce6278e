package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// auditSink captures the audit records of a handler.
type auditSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *auditSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// records returns the audit records written so far and forgets them.
func (s *auditSink) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(&s.buf)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == audit.Message {
			out = append(out, rec)
		}
	}
	s.buf.Reset()
	return out
}

// raw returns everything written so far (for leak checks).
func (s *auditSink) raw() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func newAuditedEnv(t *testing.T, mutate ...func(*Options)) (*testEnv, *auditSink) {
	t.Helper()
	sink := &auditSink{}
	log := audit.New(slog.New(slog.NewJSONHandler(sink, nil)), "n1")
	env := newEnv(t, append(mutate, func(o *Options) { o.Audit = log })...)
	return env, sink
}

// expectAudit checks the one audit record rs must hold.
func expectAudit(t *testing.T, rs []map[string]any, event, actor, target, outcome string) map[string]any {
	t.Helper()
	if len(rs) != 1 {
		t.Fatalf("audit records %v, want one %s", rs, event)
	}
	r := rs[0]
	if r["event"] != event || r["actor"] != actor || r["target"] != target || r["outcome"] != outcome || r["node"] != "n1" {
		t.Fatalf("audit record %v, want event=%s actor=%s target=%s outcome=%s node=n1", r, event, actor, target, outcome)
	}
	if r["client"] == "" || r["client"] == nil {
		t.Fatalf("audit record %v has no client address", r)
	}
	return r
}

func TestUserChangesAreAudited(t *testing.T) {
	env, sink := newAuditedEnv(t)
	steps := []struct {
		name, method, path, caller, body string
		status                           int
		event, target, outcome           string
	}{
		{"create", "POST", "/v1/users", "root", `{"username":"carol","password":"create-Secret-1","grants":[{"action":"produce","patterns":["o*"]}]}`,
			201, "user.create", "carol", audit.OK},
		{"create refused to a non-admin", "POST", "/v1/users", "alice", `{"username":"eve","password":"create-Secret-2"}`,
			403, "user.create", "", audit.Denied},
		{"create escalation", "POST", "/v1/users", "ops", `{"username":"eve","password":"create-Secret-3","grants":[{"action":"admin"}]}`,
			403, "user.create", "eve", audit.Denied},
		{"create duplicate", "POST", "/v1/users", "ops", `{"username":"carol","password":"create-Secret-4"}`,
			409, "user.create", "carol", audit.Denied},
		{"create invalid", "POST", "/v1/users", "ops", `{"username":"x y","password":"create-Secret-5"}`,
			400, "user.create", "x y", audit.Failed},
		{"grants", "PUT", "/v1/users/carol/grants", "ops", `{"grants":[{"action":"consume","patterns":["o*"]}]}`,
			200, "user.grants", "carol", audit.OK},
		{"own grants", "PUT", "/v1/users/ops/grants", "ops", `{"grants":[]}`,
			403, "user.grants", "ops", audit.Denied},
		{"grants of a missing user", "PUT", "/v1/users/nobody/grants", "ops", `{"grants":[]}`,
			404, "user.grants", "nobody", audit.Failed},
		{"password by an admin", "PUT", "/v1/users/carol/password", "ops", `{"new_password":"new-Secret-6"}`,
			204, "user.password", "carol", audit.OK},
		{"password of another user", "PUT", "/v1/users/alice/password", "bob", `{"new_password":"new-Secret-7"}`,
			403, "user.password", "alice", audit.Denied},
		{"own password, wrong current", "PUT", "/v1/users/alice/password", "alice", `{"new_password":"new-Secret-8","current_password":"wrong-Secret-9"}`,
			403, "user.password", "alice", audit.Denied},
		{"own password", "PUT", "/v1/users/alice/password", "alice", `{"new_password":"new-Secret-10","current_password":"pw-alice"}`,
			204, "user.password", "alice", audit.OK},
		{"delete root", "DELETE", "/v1/users/root", "ops", "", 403, "user.delete", "root", audit.Denied},
		{"delete by a non-admin", "DELETE", "/v1/users/carol", "bob", "", 403, "user.delete", "carol", audit.Denied},
		{"delete", "DELETE", "/v1/users/carol", "ops", "", 204, "user.delete", "carol", audit.OK},
		{"read refused", "GET", "/v1/users/carol", "bob", "", 403, "user.read", "carol", audit.Denied},
	}
	var all strings.Builder
	for _, s := range steps {
		var body []byte
		if s.body != "" {
			body = []byte(s.body)
		}
		rec := env.do(s.method, s.path, s.caller, body)
		if rec.Code != s.status {
			t.Fatalf("%s: status %d, want %d (%s)", s.name, rec.Code, s.status, rec.Body.String())
		}
		all.WriteString(sink.raw())
		rs := sink.records(t)
		r := expectAudit(t, rs, s.event, s.caller, s.target, s.outcome)
		if s.name == "create" && r["grants"] != "produce:o*" {
			t.Errorf("create record grants %v", r["grants"])
		}
		if s.name == "own password" && r["self"] != true {
			t.Errorf("own password record %v lacks self=true", r)
		}
	}
	// Reads that pass are not audited.
	expectStatus(t, env.do("GET", "/v1/users", "ops", nil), 200)
	if rs := sink.records(t); len(rs) != 0 {
		t.Fatalf("an allowed read was audited: %v", rs)
	}
	for _, secret := range []string{"Secret-", "pw-alice", "$2a$"} {
		if strings.Contains(all.String(), secret) {
			t.Fatalf("an audit line holds a password or hash (%q):\n%s", secret, all.String())
		}
	}
}

func TestUserChangesWithSecurityOffNameTheSecurityOffActor(t *testing.T) {
	env, sink := newAuditedEnv(t, func(o *Options) { o.SecurityEnabled = false })
	expectStatus(t, env.do("POST", "/v1/users", "", []byte(`{"username":"dana","password":"p-Secret"}`)), 201)
	expectAudit(t, sink.records(t), "user.create", audit.ActorSecurityOff, "dana", audit.OK)
}

func TestRemoteLinkChangesAreAudited(t *testing.T) {
	env := newEnv(t)
	rf := &remoteFake{fanoutFake: &fanoutFake{fakeBackend: env.be}}
	env, sink := newAuditedEnv(t, func(o *Options) { o.Backend = rf; o.Auth = &fakeAuth{be: rf.fakeBackend} })
	rf.fakeBackend = env.be
	env.be.topics["orders-parent"] = meta.Topic{Name: "orders-parent", Partitions: 3, Owner: "root"}
	const path = "/v1/topics/orders-parent/children"
	good := `{"remote":{"url":"http://127.0.0.2:7942","topic":"t","user":"u","password":"remote-Secret-1"}}`

	expectStatus(t, env.do("POST", path, "root", []byte(good)), 200)
	raw := sink.raw()
	r := expectAudit(t, sink.records(t), "fanout.remote.attach", "root", "orders-parent", audit.OK)
	if r["child"] != "remote:t@x:1" || r["remote_url"] != "http://127.0.0.2:7942" || r["remote_topic"] != "t" || r["remote_user"] != "u" {
		t.Fatalf("attach record %v", r)
	}
	rf.attachErr = service.NewTargetError("unauthorized")
	expectStatus(t, env.do("POST", path, "root", []byte(good)), 422)
	raw += sink.raw()
	expectAudit(t, sink.records(t), "fanout.remote.attach", "root", "orders-parent", audit.Failed)

	expectStatus(t, env.do("DELETE", path+"/remote:t@x:1", "root", nil), 204)
	r = expectAudit(t, sink.records(t), "fanout.remote.detach", "root", "orders-parent", audit.OK)
	if r["child"] != "remote:t@x:1" {
		t.Fatalf("detach record %v", r)
	}
	if strings.Contains(raw, "remote-Secret-1") {
		t.Fatalf("an audit line holds the remote password:\n%s", raw)
	}
}
