package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// fanoutFake adds the fan-out calls to the fake backend and records them.
type fanoutFake struct {
	lag map[string]int64 // child → lag_messages reported by Children
	*fakeBackend
	attached  []string
	detached  []string
	attachErr error
}

func (f *fanoutFake) AttachChild(_ context.Context, parent, child string, delay int64) (meta.Topic, error) {
	if f.attachErr != nil {
		return meta.Topic{}, f.attachErr
	}
	f.attached = append(f.attached, parent+">"+child)
	t, _ := f.Topic(parent)
	t.Children = append(t.Children, child)
	return t, nil
}

func (f *fanoutFake) DetachChild(_ context.Context, parent, child string) error {
	f.detached = append(f.detached, parent+">"+child)
	return nil
}

func (f *fanoutFake) Children(_ context.Context, parent meta.Topic) []service.ChildStatus {
	var out []service.ChildStatus
	for _, c := range parent.Children {
		ct := f.topics[c]
		out = append(out, service.ChildStatus{Name: c, Link: "local", State: service.ChildIncomplete, Cursors: []service.ChildCursor{},
			DelayMs: ct.FanoutDelayMs, LagMessages: f.lag[c], LagComplete: true})
	}
	return out
}

func newFanoutEnv(t *testing.T) (*testEnv, *fanoutFake) {
	env := newEnv(t)
	ff := &fanoutFake{fakeBackend: env.be}
	env = newEnv(t, func(o *Options) { o.Backend = ff; o.Auth = &fakeAuth{be: ff.fakeBackend} })
	ff.fakeBackend = env.be
	return env, ff
}

func TestAttachCheckOrderAndStatuses(t *testing.T) {
	env, ff := newFanoutEnv(t)
	env.be.topics["orders-parent"] = meta.Topic{Name: "orders-parent", Partitions: 3, Owner: "alice"}
	env.be.topics["orders-child"] = meta.Topic{Name: "orders-child", Partitions: 3, Owner: "alice"}
	env.be.topics["other"] = meta.Topic{Name: "other", Partitions: 3, Owner: "root"}
	cases := []struct {
		name, user, path, body string
		want                   int
	}{
		{"missing child", "alice", "/v1/topics/orders-parent/children", `{}`, 400},
		{"bad child name", "alice", "/v1/topics/orders-parent/children", `{"child":"a/b"}`, 400},
		{"own child", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-parent"}`, 400},
		{"negative delay", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-child","delay_ms":-1}`, 400},
		{"delay over a year", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-child","delay_ms":31536000001}`, 400},
		{"unknown field", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-child","x":1}`, 400},
		{"no manage right on the child", "alice", "/v1/topics/orders-parent/children", `{"child":"other"}`, 403},
		{"no manage right on the parent", "alice", "/v1/topics/other/children", `{"child":"orders-child"}`, 403},
		{"missing parent", "alice", "/v1/topics/orders-nope/children", `{"child":"orders-child"}`, 404},
		{"missing child topic", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-nope"}`, 404},
		{"attached", "alice", "/v1/topics/orders-parent/children", `{"child":"orders-child","delay_ms":0}`, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := env.do("POST", tc.path, tc.user, []byte(tc.body))
			expectStatus(t, rec, tc.want)
		})
	}
	if len(ff.attached) != 1 || ff.attached[0] != "orders-parent>orders-child" {
		t.Fatalf("backend attach calls = %v; only the valid request may reach it", ff.attached)
	}
	ff.attachErr = ErrUnavailable
	expectStatus(t, env.do("POST", "/v1/topics/orders-parent/children", "alice", []byte(`{"child":"orders-child"}`)), 503)
	ff.attachErr = ErrConflict
	expectStatus(t, env.do("POST", "/v1/topics/orders-parent/children", "alice", []byte(`{"child":"orders-child"}`)), 409)
}

func TestChildrenListingAndDetach(t *testing.T) {
	env, ff := newFanoutEnv(t)
	env.be.topics["orders-p"] = meta.Topic{Name: "orders-p", Partitions: 3, Owner: "alice", Children: []string{"orders-c"}, Role: meta.RoleParent}
	env.be.topics["orders-c"] = meta.Topic{Name: "orders-c", Partitions: 3, Owner: "alice", Parent: "orders-p", Role: meta.RoleChild}
	env.be.topics["orders-s"] = meta.Topic{Name: "orders-s", Partitions: 3, Owner: "alice"}

	rec := env.do("GET", "/v1/topics/orders-p/children", "bob", nil) // authn is enough
	expectStatus(t, rec, http.StatusOK)
	var body struct {
		Parent   string                `json:"parent"`
		Children []service.ChildStatus `json:"children"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Parent != "orders-p" || len(body.Children) != 1 || body.Children[0].Name != "orders-c" {
		t.Fatalf("listing = %s (%v)", rec.Body, err)
	}
	rec = env.do("GET", "/v1/topics/orders-s/children", "bob", nil)
	expectStatus(t, rec, http.StatusOK)
	if got := rec.Body.String(); got != `{"parent":"orders-s","children":[]}`+"\n" && got != `{"parent":"orders-s","children":[]}` {
		t.Fatalf("a standalone topic lists %s, want an empty children array", got)
	}
	expectStatus(t, env.do("GET", "/v1/topics/orders-none/children", "bob", nil), 404)

	expectStatus(t, env.do("DELETE", "/v1/topics/orders-p/children/orders-s", "alice", nil), 404) // not attached
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-p/children/orders-c", "bob", nil), 403)
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-p/children/orders-c", "alice", nil), 204)
	if len(ff.detached) != 1 {
		t.Fatalf("detach calls = %v", ff.detached)
	}
}

func TestChildrenRoutesAnswer503WhenTheBackendHasNoFanout(t *testing.T) {
	env := newEnv(t) // the plain fake backend implements no FanoutBackend
	env.be.topics["orders-p"] = meta.Topic{Name: "orders-p", Partitions: 3, Owner: "alice"}
	expectStatus(t, env.do("GET", "/v1/topics/orders-p/children", "alice", nil), http.StatusServiceUnavailable)
	expectStatus(t, env.do("POST", "/v1/topics/orders-p/children", "alice", []byte(`{"child":"orders-c"}`)), http.StatusServiceUnavailable)
	expectStatus(t, env.do("DELETE", "/v1/topics/orders-p/children/orders-c", "alice", nil), http.StatusServiceUnavailable)
}

// Deleting a parent would silently detach its children and lose what a delay child still
// had pending: without detach_children=true it is a 409 naming the children; with it, the
// answer names each detached child and the messages it had not yet received.
func TestDeleteParentNeedsDetachChildrenAndReportsWhatIsLost(t *testing.T) {
	env, ff := newFanoutEnv(t)
	ff.lag = map[string]int64{"orders-late": 7}
	env.be.topics["orders"] = meta.Topic{Name: "orders", Partitions: 3, Owner: "alice", Role: meta.RoleParent,
		Children: []string{"orders-copy", "orders-late"}}
	env.be.topics["orders-copy"] = meta.Topic{Name: "orders-copy", Partitions: 3, Owner: "alice", Parent: "orders", Role: meta.RoleChild}
	env.be.topics["orders-late"] = meta.Topic{Name: "orders-late", Partitions: 3, Owner: "alice", Parent: "orders",
		Role: meta.RoleChild, FanoutDelayMs: 60000}

	for _, q := range []string{"", "?detach_children=false"} {
		rec := env.do("DELETE", "/v1/topics/orders"+q, "alice", nil)
		expectStatus(t, rec, 409)
		body := expectJSONError(t, rec)
		if fmt.Sprint(body["children"]) != "[orders-copy orders-late]" {
			t.Fatalf("409 body %v does not name the children", body)
		}
	}
	for _, q := range []string{"?detach_children=1", "?detach_children=yes", "?detach_children=TRUE", "?detach_children=true&detach_children=true"} {
		expectStatus(t, env.do("DELETE", "/v1/topics/orders"+q, "alice", nil), 400)
	}
	if env.be.called("DeleteTopic") {
		t.Fatal("the parent was deleted without detach_children=true")
	}
	rec := env.do("DELETE", "/v1/topics/orders?detach_children=true", "alice", nil)
	expectStatus(t, rec, 200)
	var got topicDeletion
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := topicDeletion{Deleted: "orders", DetachedChildren: []detachedChild{
		{Name: "orders-copy", Link: "local", UndeliveredComplete: true},
		{Name: "orders-late", Link: "local", DelayMs: 60000, UndeliveredMessages: 7, UndeliveredComplete: true},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %+v, want %+v", got, want)
	}
	// A topic without children needs no flag and still answers 204.
	rec = env.do("DELETE", "/v1/topics/orders-copy", "alice", nil)
	if rec.Code != 204 || rec.Body.Len() != 0 {
		t.Fatalf("childless delete = %d %q, want 204 empty", rec.Code, rec.Body.String())
	}
}
