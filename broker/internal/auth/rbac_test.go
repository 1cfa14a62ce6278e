package auth

import (
	"testing"

	"narad.dev/broker/internal/meta"
)

func TestPatternMatchesLiteralExactlyAndStarAsPrefix(t *testing.T) {
	cases := []struct {
		pattern, topic string
		want           bool
	}{
		{"orders", "orders", true},
		{"orders", "orders2", false},
		{"orders", "order", false},
		{"orders*", "orders", true},
		{"orders*", "orders.eu", true},
		{"orders*", "order", false},
		{"orders*", "xorders", false},
		{"*", "anything", true},
		{"*", "a", true},
		{"", "", false},
		{"", "a", false},
		{"a*b", "a*b", true}, // only a trailing star is special; '*' never appears in a topic name
		{"a*b", "axb", false},
	}
	for _, c := range cases {
		if got := PatternMatches(c.pattern, c.topic); got != c.want {
			t.Errorf("PatternMatches(%q, %q) = %v, want %v", c.pattern, c.topic, got, c.want)
		}
	}
}

func TestAllowsNeedsMatchingGrantOfSameActionUnlessAdmin(t *testing.T) {
	alice := &meta.User{Username: "alice", Grants: []meta.Grant{
		{Action: meta.ActionProduce, Patterns: []string{"orders*", "audit"}},
		{Action: meta.ActionConsume, Patterns: []string{"orders.eu"}},
	}}
	admin := &meta.User{Username: "ops", Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
	root := &meta.User{Username: "admin", Root: true}
	cases := []struct {
		u             *meta.User
		action, topic string
		want          bool
	}{
		{alice, meta.ActionProduce, "orders.us", true},
		{alice, meta.ActionProduce, "audit", true},
		{alice, meta.ActionProduce, "audit2", false},
		{alice, meta.ActionConsume, "orders.eu", true},
		{alice, meta.ActionConsume, "orders.us", false},
		{alice, meta.ActionCreate, "orders.us", false},
		{admin, meta.ActionCreate, "anything", true},
		{root, meta.ActionConsume, "anything", true},
		{nil, meta.ActionProduce, "orders", false},
	}
	for _, c := range cases {
		if got := Allows(c.u, c.action, c.topic); got != c.want {
			name := "<nil>"
			if c.u != nil {
				name = c.u.Username
			}
			t.Errorf("Allows(%s, %s, %s) = %v, want %v", name, c.action, c.topic, got, c.want)
		}
	}
}

func TestManageRightIsOwnerOrAdmin(t *testing.T) {
	owned := meta.Topic{Name: "t", Owner: "alice"}
	unowned := meta.Topic{Name: "u"}
	alice := &meta.User{Username: "alice"}
	bob := &meta.User{Username: "bob", Grants: []meta.Grant{{Action: meta.ActionCreate, Patterns: []string{"*"}}}}
	admin := &meta.User{Username: "ops", Grants: []meta.Grant{{Action: meta.ActionAdmin}}}
	root := &meta.User{Username: "admin", Root: true}
	cases := []struct {
		u    *meta.User
		t    meta.Topic
		want bool
	}{
		{alice, owned, true},
		{bob, owned, false},
		{admin, owned, true},
		{root, unowned, true},
		{alice, unowned, false},
		{&meta.User{Username: ""}, unowned, false},
		{nil, owned, false},
	}
	for i, c := range cases {
		if got := CanManage(c.u, c.t); got != c.want {
			t.Errorf("case %d: CanManage = %v, want %v", i, got, c.want)
		}
	}
}

func TestIsAdminMeansRootOrAdminGrant(t *testing.T) {
	if !IsAdmin(&meta.User{Root: true}) || !IsAdmin(&meta.User{Grants: []meta.Grant{{Action: "admin"}}}) {
		t.Fatal("root or admin grant not recognised as admin")
	}
	if IsAdmin(nil) || IsAdmin(&meta.User{Grants: []meta.Grant{{Action: "create", Patterns: []string{"*"}}}}) {
		t.Fatal("non-admin recognised as admin")
	}
}

// A remote link needs the admin grant: create and produce on every topic, or owning the
// parent, are not enough.
func TestMayLinkRemoteNeedsAdmin(t *testing.T) {
	every := []string{"*"}
	for _, tc := range []struct {
		name string
		u    *meta.User
		want bool
	}{
		{"nil", nil, false},
		{"root", &meta.User{Username: "root", Root: true}, true},
		{"admin grant", &meta.User{Username: "ops", Grants: []meta.Grant{{Action: meta.ActionAdmin}}}, true},
		{"create, produce and consume on everything", &meta.User{Username: "alice", Grants: []meta.Grant{
			{Action: meta.ActionCreate, Patterns: every}, {Action: meta.ActionProduce, Patterns: every},
			{Action: meta.ActionConsume, Patterns: every}}}, false},
		{"no grants", &meta.User{Username: "bob"}, false},
	} {
		if got := MayLinkRemote(tc.u); got != tc.want {
			t.Errorf("%s: MayLinkRemote = %v, want %v", tc.name, got, tc.want)
		}
	}
}
