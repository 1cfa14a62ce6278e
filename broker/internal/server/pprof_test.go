package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/meta"
)

// userTable is an auth.UserSource over a fixed map.
type userTable map[string]meta.User

func (t userTable) User(name string) (meta.User, bool) { u, ok := t[name]; return u, ok }

func TestPprofNeedsAdminCredentialsAndNeverServesCmdline(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users := userTable{
		"root":   {Username: "root", PasswordHash: string(hash), Root: true, Grants: []meta.Grant{{Action: meta.ActionAdmin}}},
		"reader": {Username: "reader", PasswordHash: string(hash), Grants: []meta.Grant{{Action: meta.ActionConsume, Patterns: []string{"*"}}}},
	}
	h := pprofHandler(auth.NewAuthenticator(users, auth.AuthOptions{DummyCost: bcrypt.MinCost}), true)
	get := func(path, user string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if user != "" {
			r.SetBasicAuth(user, "pw")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	cases := []struct {
		path, user string
		want       int
	}{
		{"/debug/pprof/", "", http.StatusUnauthorized},
		{"/debug/pprof/cmdline", "", http.StatusUnauthorized},
		{"/debug/pprof/heap", "", http.StatusUnauthorized},
		{"/debug/pprof/", "reader", http.StatusForbidden},
		{"/debug/pprof/goroutine?debug=1", "reader", http.StatusForbidden},
		{"/debug/pprof/", "root", http.StatusOK},
		{"/debug/pprof/goroutine?debug=1", "root", http.StatusOK},
		{"/debug/pprof/cmdline", "root", http.StatusNotFound},
	}
	for _, c := range cases {
		w := get(c.path, c.user)
		if w.Code != c.want {
			t.Errorf("GET %s as %q = %d, want %d (body %.120q)", c.path, c.user, w.Code, c.want, w.Body.String())
		}
		if w.Code >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
			t.Errorf("GET %s as %q: error answer is not JSON", c.path, c.user)
		}
		if len(os.Args) > 1 && strings.Contains(w.Body.String(), strings.Join(os.Args[1:], "\x00")) {
			t.Errorf("GET %s as %q shows the process arguments", c.path, c.user)
		}
	}
	if w := get("/debug/pprof/", ""); w.Header().Get("WWW-Authenticate") == "" {
		t.Error("401 without a Basic challenge")
	}
}

func TestPprofWithSecurityOffServesWithoutCredentialsButNotCmdline(t *testing.T) {
	h := pprofHandler(nil, false)
	for path, want := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/cmdline": http.StatusNotFound} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != want {
			t.Errorf("GET %s = %d, want %d", path, w.Code, want)
		}
	}
}
