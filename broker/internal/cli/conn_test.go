package cli

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func basic(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }

const emptyList = `{"topics":[],"next_page_token":""}`

// saveContext writes a contexts file holding one current context.
func saveContext(t *testing.T, dir string, c savedContext) {
	t.Helper()
	s := &contextStore{path: filepath.Join(dir, contextsFileName)}
	s.put(c)
	if err := s.save(); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionSettingsPrecedenceFlagEnvContextDefault(t *testing.T) {
	flagSrv, envSrv, ctxSrv := newFakeAPI(t), newFakeAPI(t), newFakeAPI(t)
	for _, f := range []*fakeAPI{flagSrv, envSrv, ctxSrv} {
		f.fixed("GET /v1/topics", 200, emptyList)
	}
	dir := t.TempDir()
	saveContext(t, dir, savedContext{Name: "c", Server: ctxSrv.srv.URL, User: "ctxuser", Password: "ctxpass"})
	cases := []struct {
		name     string
		env      map[string]string
		flags    []string
		wantSrv  *fakeAPI
		wantAuth string
	}{
		{"flags win over env and context",
			map[string]string{EnvAddr: envSrv.srv.URL, EnvUser: "envuser", EnvPass: "envpass"},
			[]string{"-s", flagSrv.srv.URL, "-u", "flaguser", "--password-file", writeSecret(t, "flagpass\n")}, flagSrv, basic("flaguser", "flagpass")},
		{"env wins over context",
			map[string]string{EnvAddr: envSrv.srv.URL, EnvUser: "envuser", EnvPass: "envpass"},
			nil, envSrv, basic("envuser", "envpass")},
		{"context fills what flags and env leave",
			map[string]string{}, nil, ctxSrv, basic("ctxuser", "ctxpass")},
		{"each field resolves on its own",
			map[string]string{EnvUser: "envuser"},
			[]string{"--server", flagSrv.srv.URL}, flagSrv, basic("envuser", "ctxpass")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.env[EnvConfigDir] = dir
			before := len(tc.wantSrv.allCalls())
			args := append(append([]string{}, tc.flags...), "topic", "ls")
			res := runCLI(context.Background(), testApp(tc.env), "", args...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			calls := tc.wantSrv.allCalls()
			if len(calls) != before+1 {
				t.Fatalf("expected server got %d new calls", len(calls)-before)
			}
			if got := calls[len(calls)-1].Auth; got != tc.wantAuth {
				t.Fatalf("Authorization = %q, want %q", got, tc.wantAuth)
			}
		})
	}
}

func TestConnectionDefaultsToLocalServerWithoutAuth(t *testing.T) {
	a := testApp(map[string]string{EnvConfigDir: t.TempDir()})
	root := newRoot(a)
	cmd, _, err := root.Find([]string{"topic", "ls"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.resolveConn(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if c != (conn{Server: DefaultServer}) {
		t.Fatalf("conn = %+v", c)
	}
}

func TestConfigDirFollowsEnvThenXDGThenHome(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvConfigDir: "/a", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/a"},
		{map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/narad"},
		{map[string]string{"HOME": "/h"}, "/h/.config/narad"},
	}
	for _, tc := range cases {
		got, err := configDir(func(k string) string { return tc.env[k] })
		if err != nil || got != tc.want {
			t.Errorf("configDir(%v) = %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

func TestContextsFileIsWrittenWithMode0600AndFirstBecomesCurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh")
	env := map[string]string{EnvConfigDir: dir}
	if r := runCLI(context.Background(), testApp(env), "pw\n", "ctx", "add", "prod", "--server", "http://prod:7942", "-u", "alice", "--password-file", "-"); r.code != 0 {
		t.Fatalf("ctx add: %s", r.stderr)
	}
	if r := runCLI(context.Background(), testApp(env), "", "ctx", "add", "dev", "-s", "http://dev:7942"); r.code != 0 {
		t.Fatalf("ctx add: %s", r.stderr)
	}
	path := filepath.Join(dir, contextsFileName)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("contexts.json mode = %v, want 0600", st.Mode().Perm())
	}
	s, err := loadContexts(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.Current != "prod" || len(s.Contexts) != 2 || s.Contexts[1] != (savedContext{"prod", "http://prod:7942", "alice", "pw"}) {
		t.Fatalf("store = %+v", s)
	}
	if r := runCLI(context.Background(), testApp(env), "", "ctx", "select", "dev"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runCLI(context.Background(), testApp(env), "", "ctx", "ls")
	if r.code != 0 || !containsLine(r.stdout, "*", "dev") || containsLine(r.stdout, "*", "prod") {
		t.Fatalf("ctx ls:\n%s", r.stdout)
	}
	if r := runCLI(context.Background(), testApp(env), "", "ctx", "rm", "dev"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := runCLI(context.Background(), testApp(env), "", "ctx", "select", "dev"); r.code != 1 || r.stderr != "narad: no context named \"dev\"\n" {
		t.Fatalf("select removed: %+v", r)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after rewrite = %v", st.Mode().Perm())
	}
}

// runWithCAFlag runs the CLI on a root that has the --ca-file flag registered.
func runWithCAFlag(a *app, args ...string) result {
	root := newRoot(a)
	addCAFileFlag(root.PersistentFlags())
	addCAFileFlag(root.PersistentFlags()) // a second registration is harmless
	return runRoot(context.Background(), root, "", args...)
}

func TestCAFileMakesTheCLITrustAnHTTPSServer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, emptyList)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(notPEM, []byte("nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		env     map[string]string
		flags   []string
		wantErr string // "" = success
	}{
		{"system roots do not trust it", nil, nil, "certificate"},
		{"flag", nil, []string{"--ca-file", ca}, ""},
		{"env", map[string]string{EnvCAFile: ca}, nil, ""},
		{"flag beats env", map[string]string{EnvCAFile: notPEM}, []string{"--ca-file", ca}, ""},
		{"missing file", nil, []string{"--ca-file", filepath.Join(dir, "none.pem")}, "narad: --ca-file: open "},
		{"file without certificates", map[string]string{EnvCAFile: notPEM}, nil, "narad: --ca-file: " + notPEM + " holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvConfigDir: t.TempDir(), EnvAddr: srv.URL}
			for k, v := range tc.env {
				env[k] = v
			}
			res := runWithCAFlag(testApp(env), append(append([]string{}, tc.flags...), "topic", "ls")...)
			if tc.wantErr == "" {
				if res.code != 0 {
					t.Fatalf("exit %d: %s", res.code, res.stderr)
				}
				return
			}
			if res.code != 1 || !strings.Contains(res.stderr, tc.wantErr) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", res.code, res.stderr, tc.wantErr)
			}
		})
	}
}
