package engine

import (
	"testing"

	"narad.dev/broker/internal/meta"
)

func TestUserReadsNeverStaleAfterUpdateOrDelete(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	u := meta.User{Username: "alice", PasswordHash: "$2a$04$first", Grants: []meta.Grant{{Action: meta.ActionProduce, Patterns: []string{"orders"}}}}
	if err := n.e.CreateUser(n.ctx(), u); err != nil {
		t.Fatal(err)
	}
	got, ok := n.e.User("alice") // warms the cached view
	if !ok || got.PasswordHash != u.PasswordHash || got.CreatedAtMs == 0 || got.UpdatedAtMs != got.CreatedAtMs {
		t.Fatalf("user after create: %+v, %v", got, ok)
	}
	u.PasswordHash = "$2a$04$second"
	u.CreatedAtMs = got.CreatedAtMs
	if err := n.e.UpdateUser(n.ctx(), u); err != nil {
		t.Fatal(err)
	}
	if got, ok := n.e.User("alice"); !ok || got.PasswordHash != "$2a$04$second" {
		t.Fatalf("User() right after a password change: %+v, %v — authentication would accept the old password", got, ok)
	}
	if err := n.e.DeleteUser(n.ctx(), "alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.e.User("alice"); ok {
		t.Fatal("User() still finds a deleted user")
	}
	for _, x := range n.e.Users() {
		if x.Username == "alice" {
			t.Fatal("Users() lists a deleted user")
		}
	}
}
