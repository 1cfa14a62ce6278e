package api

import (
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/meta"
)

func TestCreateUserRulesAndEscalation(t *testing.T) {
	long := strings.Repeat("p", 73)
	cases := []struct {
		name, caller, body string
		want               int
	}{
		{"non-admin refused before body", "bob", `{`, 403},
		{"scoped grant holder is not an admin", "alice", `{"username":"x","password":"p","grants":[{"action":"produce","patterns":["orders-1"]}]}`, 403},
		{"bad json", "ops", `{"username":"x","password":"p","extra":1}`, 400},
		{"bad username", "ops", `{"username":"a b","password":"p"}`, 400},
		{"missing password", "ops", `{"username":"x"}`, 400},
		{"password over 72 bytes", "ops", `{"username":"x","password":"` + long + `"}`, 400},
		{"admin grant with patterns", "ops", `{"username":"x","password":"p","grants":[{"action":"admin","patterns":["a"]}]}`, 400},
		{"scoped grant without patterns", "ops", `{"username":"x","password":"p","grants":[{"action":"produce"}]}`, 400},
		{"unknown action", "ops", `{"username":"x","password":"p","grants":[{"action":"delete","patterns":["a"]}]}`, 400},
		{"invalid grant before escalation", "ops", `{"username":"x","password":"p","grants":[{"action":"admin"},{"action":"produce"}]}`, 400},
		{"non-root admin may not grant admin", "ops", `{"username":"x","password":"p","grants":[{"action":"admin"}]}`, 403},
		{"non-root admin may grant scoped", "ops", `{"username":"x","password":"p","grants":[{"action":"produce","patterns":["*"]}]}`, 201},
		{"root may grant admin", "root", `{"username":"x","password":"p","grants":[{"action":"admin"}]}`, 201},
		{"existing username", "ops", `{"username":"alice","password":"p"}`, 409},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			rec := env.do("POST", "/v1/users", c.caller, []byte(c.body))
			expectStatus(t, rec, c.want)
			if c.want != 201 {
				return
			}
			if strings.Contains(rec.Body.String(), "password") {
				t.Errorf("user body leaks the password: %s", rec.Body.String())
			}
			u := env.be.users["x"]
			if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("p")) != nil || u.CreatedAtMs == 0 {
				t.Errorf("stored user %+v", u)
			}
		})
	}
}

func TestListAndGetUsersNeedAdminAndHideHashes(t *testing.T) {
	env := newEnv(t)
	expectStatus(t, env.do("GET", "/v1/users", "alice", nil), 403)
	expectStatus(t, env.do("GET", "/v1/users/alice", "alice", nil), 403)
	expectStatus(t, env.do("GET", "/v1/users/nobody", "ops", nil), 404)
	rec := env.do("GET", "/v1/users", "ops", nil)
	expectStatus(t, rec, 200)
	var users []map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &users); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u["username"].(string))
		if _, leaked := u["password_hash"]; leaked {
			t.Errorf("hash leaked for %v", u["username"])
		}
	}
	if strings.Join(names, ",") != "alice,bob,ops,root" {
		t.Errorf("users %v, want sorted alice,bob,ops,root", names)
	}
	rec = env.do("GET", "/v1/users/root", "ops", nil)
	expectStatus(t, rec, 200)
	if got := strings.TrimSpace(rec.Body.String()); got != `{"username":"root","grants":[{"action":"admin"}],"root":true}` {
		t.Errorf("root user body %s", got)
	}
}

func TestSetGrantsEscalationPaths(t *testing.T) {
	cases := []struct {
		name, caller, target, body string
		want                       int
	}{
		{"non-admin", "alice", "bob", `{"grants":[]}`, 403},
		{"grants required", "ops", "bob", `{}`, 400},
		{"invalid grant", "ops", "bob", `{"grants":[{"action":"consume","patterns":["a*b"]}]}`, 400},
		{"validation before existence", "ops", "nobody", `{"grants":[{"action":"x"}]}`, 400},
		{"unknown target", "ops", "nobody", `{"grants":[]}`, 404},
		{"own grants", "ops", "ops", `{"grants":[]}`, 403},
		{"root grants immutable", "ops", "root", `{"grants":[]}`, 403},
		{"root grants immutable even for root", "root", "root", `{"grants":[]}`, 403},
		{"non-root admin hands out admin", "ops", "bob", `{"grants":[{"action":"admin"}]}`, 403},
		{"root hands out admin", "root", "bob", `{"grants":[{"action":"admin"}]}`, 200},
		{"admin clears grants", "ops", "alice", `{"grants":[]}`, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			rec := env.do("PUT", "/v1/users/"+c.target+"/grants", c.caller, []byte(c.body))
			expectStatus(t, rec, c.want)
			if c.want != 200 {
				if env.be.called("UpdateUser") {
					t.Error("UpdateUser reached on a refusal")
				}
				return
			}
			var got userObject
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			stored := env.be.users[c.target]
			if len(got.Grants) != len(stored.Grants) || got.UpdatedAtMs == 0 {
				t.Errorf("response %+v vs stored %+v", got, stored)
			}
		})
	}
}

func TestSetPasswordRules(t *testing.T) {
	cases := []struct {
		name, caller, target, body string
		want                       int
	}{
		{"bad json", "alice", "alice", `{"new_password":1}`, 400},
		{"missing new password", "alice", "alice", `{}`, 400},
		{"new password over 72 bytes", "ops", "alice", `{"new_password":"` + strings.Repeat("x", 73) + `"}`, 400},
		{"other user's password needs admin", "bob", "alice", `{"new_password":"n"}`, 403},
		{"non-admin cannot probe unknown users", "bob", "nobody", `{"new_password":"n"}`, 403},
		{"admin gets 404 for unknown user", "ops", "nobody", `{"new_password":"n"}`, 404},
		{"self without current password", "alice", "alice", `{"new_password":"n"}`, 403},
		{"self with wrong current password", "alice", "alice", `{"new_password":"n","current_password":"nope"}`, 403},
		{"self with current password", "alice", "alice", `{"new_password":"n","current_password":"pw-alice"}`, 204},
		{"admin resets another user", "ops", "alice", `{"new_password":"n"}`, 204},
		{"only root changes root", "ops", "root", `{"new_password":"n"}`, 403},
		{"root changes root", "root", "root", `{"new_password":"n"}`, 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			rec := env.do("PUT", "/v1/users/"+c.target+"/password", c.caller, []byte(c.body))
			expectStatus(t, rec, c.want)
			if c.want != 204 {
				return
			}
			if rec.Body.Len() != 0 {
				t.Errorf("204 body %q", rec.Body.String())
			}
			if err := bcrypt.CompareHashAndPassword([]byte(env.be.users[c.target].PasswordHash), []byte("n")); err != nil {
				t.Errorf("new password not stored: %v", err)
			}
		})
	}
}

func TestDeleteUserRules(t *testing.T) {
	cases := []struct {
		name, caller, target string
		want                 int
	}{
		{"non-admin", "alice", "bob", 403},
		{"unknown user", "ops", "nobody", 404},
		{"root cannot be deleted", "ops", "root", 403},
		{"nobody deletes their own account", "ops", "ops", 403},
		{"admin deletes a user", "ops", "bob", 204},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			expectStatus(t, env.do("DELETE", "/v1/users/"+c.target, c.caller, nil), c.want)
			_, still := env.be.users[c.target]
			if c.want != 404 && (c.want == 204) == still {
				t.Errorf("user %s present=%v after %d", c.target, still, c.want)
			}
		})
	}
}

func TestSecurityOffUserCallsActAsRoot(t *testing.T) {
	env := newEnv(t, func(o *Options) { o.SecurityEnabled = false })
	expectStatus(t, env.do("PUT", "/v1/users/root/password", "", []byte(`{"new_password":"n"}`)), 204)
	expectStatus(t, env.do("PUT", "/v1/users/bob/grants", "", []byte(`{"grants":[{"action":"admin"}]}`)), 200)
	expectStatus(t, env.do("DELETE", "/v1/users/root", "", nil), 403)
	if u := env.be.users["bob"]; len(u.Grants) != 1 || u.Grants[0].Action != meta.ActionAdmin {
		t.Errorf("bob = %+v", u)
	}
}
