package api

import (
	"context"
	"encoding/json"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// remoteFake adds the remote-children calls to the fan-out fake.
type remoteFake struct {
	*fanoutFake
	reqs      []service.RemoteAttach
	detached  []string
	attachErr error
}

func (f *remoteFake) AttachRemote(_ context.Context, req service.RemoteAttach) (meta.Topic, service.ChildStatus, error) {
	if f.attachErr != nil {
		return meta.Topic{}, service.ChildStatus{}, f.attachErr
	}
	f.reqs = append(f.reqs, req)
	t, _ := f.Topic(req.Parent)
	return t, service.ChildStatus{Name: "remote:" + req.URLs[0] + "/" + req.Topic, ID: "remote:" + req.Topic + "@x:1",
		Link: "remote", Kind: "remote", State: "active", Cursors: []service.ChildCursor{}}, nil
}

func (f *remoteFake) DetachRemote(_ context.Context, parent, id string) error {
	f.detached = append(f.detached, parent+">"+id)
	return nil
}

func (f *remoteFake) ResolveRemote(_, ref string) (string, bool) {
	return "remote:t@x:1", ref == "remote:t@x:1" || ref == "remote:http://x:1/t"
}

func TestRemoteAttachValidationAndStatuses(t *testing.T) {
	env := newEnv(t)
	rf := &remoteFake{fanoutFake: &fanoutFake{fakeBackend: env.be}}
	env = newEnv(t, func(o *Options) { o.Backend = rf; o.Auth = &fakeAuth{be: rf.fakeBackend} })
	rf.fakeBackend = env.be
	env.be.topics["orders-parent"] = meta.Topic{Name: "orders-parent", Partitions: 3, Owner: "alice"}
	env.be.topics["other"] = meta.Topic{Name: "other", Partitions: 3, Owner: "root"}
	const path = "/v1/topics/orders-parent/children"
	good := `{"remote":{"url":"http://127.0.0.2:7942,http://127.0.0.3:7942","topic":"t","user":"u","password":"pw"},"delay_ms":0,"start":"oldest"}`
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"bad url", path, `{"remote":{"url":"ftp://x:1","topic":"t"}}`, 400},
		{"url without port", path, `{"remote":{"url":"http://x","topic":"t"}}`, 400},
		{"bad topic", path, `{"remote":{"url":"http://x:1","topic":"a/b"}}`, 400},
		{"missing topic", path, `{"remote":{"url":"http://x:1"}}`, 400},
		{"bad start", path, `{"remote":{"url":"http://x:1","topic":"t"},"start":"tail"}`, 400},
		{"user without password", path, `{"remote":{"url":"http://x:1","topic":"t","user":"u"}}`, 400},
		{"child and remote", path, `{"child":"c","remote":{"url":"http://x:1","topic":"t"}}`, 400},
		{"start on a local attach", path, `{"child":"c","start":"oldest"}`, 400},
		{"unknown remote field", path, `{"remote":{"url":"http://x:1","topic":"t","x":1}}`, 400},
		{"no manage right", "/v1/topics/other/children", good, 403},
		{"missing parent", "/v1/topics/orders-nope/children", good, 404},
		// alice owns the parent and holds create on orders*: not enough for a remote link.
		{"owner without the admin grant", path, good, 403},
		{"attached by an admin", path, good, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := "alice"
			if tc.want == 200 {
				user = "ops"
			}
			rec := env.do("POST", tc.path, user, []byte(tc.body))
			expectStatus(t, rec, tc.want)
			if tc.want == 403 && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("403 body is not JSON: %s", rec.Body.String())
			}
		})
	}
	if len(rf.reqs) != 1 || rf.reqs[0].Start != "oldest" || len(rf.reqs[0].URLs) != 2 || rf.reqs[0].Password != "pw" {
		t.Fatalf("backend calls %+v; only the valid request may reach it", rf.reqs)
	}
	rf.attachErr = service.NewTargetError("unauthorized")
	rec := env.do("POST", path, "ops", []byte(good))
	expectStatus(t, rec, 422)
	var body struct{ Error, Reason string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Reason != "unauthorized" || body.Error == "" {
		t.Fatalf("422 body %s", rec.Body.String())
	}
	rf.attachErr = ErrConflict
	expectStatus(t, env.do("POST", path, "ops", []byte(good)), 409)

	expectStatus(t, env.do("DELETE", path+"/remote:t@x:1", "alice", nil), 204)
	expectStatus(t, env.do("DELETE", path+"/remote:http:%2F%2Fx:1%2Ft", "alice", nil), 204)
	expectStatus(t, env.do("DELETE", path+"/remote:nope@x:1", "alice", nil), 404)
	expectStatus(t, env.do("DELETE", "/v1/topics/other/children/remote:t@x:1", "alice", nil), 403)
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-nope/children/remote:t@x:1", "alice", nil), 404)
	if len(rf.detached) != 2 {
		t.Fatalf("detach calls %v", rf.detached)
	}
}

// FuzzRemoteAttachBody: the remote attach body check never panics, and a request it passes
// carries 1…8 target URLs, a valid topic and start, a delay in range, and the password as sent
// (only ever with a user, at most 72 bytes).
func FuzzRemoteAttachBody(f *testing.F) {
	f.Add("http://127.0.0.2:7942,http://127.0.0.3:7942", "t", "u", "pw", int64(0), "oldest")
	f.Add("http://x:1", "a/b", "", "", int64(-1), "")
	f.Add("ftp://x:1", "t", "u", "", int64(1), "tail")
	f.Fuzz(func(t *testing.T, url, topic, user, password string, delay int64, start string) {
		req, err := validRemote("p", &remoteBody{URL: url, Topic: topic, User: user, Password: password}, delay, start)
		if err != nil {
			return
		}
		switch {
		case len(req.URLs) == 0 || len(req.URLs) > 8:
			t.Fatalf("%d urls passed", len(req.URLs))
		case !validTopicName(req.Topic) || !meta.ValidStart(req.Start):
			t.Fatalf("topic %q start %q passed", req.Topic, req.Start)
		case req.DelayMs < 0 || req.DelayMs > meta.MaxDelayMs:
			t.Fatalf("delay %d passed", req.DelayMs)
		case req.Password != password || len(password) > 72 || (user != "" && password == ""):
			t.Fatalf("password of %d bytes with user %q passed as %d bytes", len(password), user, len(req.Password))
		}
		if _, err := meta.RemoteID(req.URLs[0], req.Topic); err != nil {
			t.Fatalf("passed request names no link id: %v", err)
		}
	})
}
