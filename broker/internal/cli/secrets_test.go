package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSecret writes content to a fresh file and returns its path.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every password flag that would put a password in the process's arguments is refused
// before any request is made, and the message names what to use instead.
func TestPasswordValuesOnTheCommandLineAreRefused(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics", 200, `{"topics":[]}`)
	f.fixed("POST /v1/users", 201, `{"username":"bob"}`)
	f.fixed("PUT /v1/users/bob/password", 204, "")
	cases := [][]string{
		{"-p", "pw", "topic", "ls"},
		{"--password", "pw", "topic", "ls"},
		{"topic", "ls", "--password=pw"},
		{"ctx", "add", "prod", "-s", "http://prod:7942", "-p", "pw"},
		{"user", "add", "bob", "--user-password", "pw"},
		{"user", "passwd", "bob", "--new-password", "pw"},
		{"user", "passwd", "bob", "--new-password-file", writeSecret(t, "n3w"), "--current-password", "old"},
		{"topic", "attach", "orders", "--remote", "http://other:7942", "--remote-topic", "o", "--remote-user", "u", "--remote-password", "pw"},
	}
	for _, args := range cases {
		r := runCLI(context.Background(), testApp(envFor(t, f)), "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "not taken on the command line") || !strings.Contains(r.stderr, "-file") {
			t.Errorf("%q: %+v", args, r)
		}
	}
	if n := len(f.allCalls()); n != 0 {
		t.Fatalf("%d requests made after refusals", n)
	}
}

// A password is read from a file (its first line) or from standard input, and reaches the
// server exactly.
func TestPasswordsComeFromFilesOrStandardInput(t *testing.T) {
	f := newFakeAPI(t)
	f.fixed("GET /v1/topics", 200, `{"topics":[]}`)
	f.fixed("POST /v1/users", 201, `{"username":"bob"}`)
	f.fixed("PUT /v1/users/bob/password", 204, "")
	f.fixed("POST /v1/topics/orders/children", 201, `{"id":"x"}`)
	env := envFor(t, f)
	env[EnvUser] = "admin"

	if r := runCLI(context.Background(), testApp(env), "", "--password-file", writeSecret(t, "s3cret\r\nignored\n"), "topic", "ls"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if got := f.callsTo("GET", "/v1/topics")[0].Auth; got != basic("admin", "s3cret") {
		t.Fatalf("auth from --password-file: %q", got)
	}

	if r := runCLI(context.Background(), testApp(env), "n3w\n", "user", "passwd", "bob",
		"--new-password-file", "-", "--current-password-file", writeSecret(t, "old")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if got := f.callsTo("PUT", "/v1/users/bob/password")[0].Body; !strings.Contains(got, `"new_password":"n3w"`) || !strings.Contains(got, `"current_password":"old"`) {
		t.Fatalf("passwd body %s", got)
	}

	if r := runCLI(context.Background(), testApp(env), "rpw\n", "topic", "attach", "orders", "--remote", "http://other:7942",
		"--remote-topic", "o", "--remote-user", "u", "--remote-password-file", "-"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if got := f.callsTo("POST", "/v1/topics/orders/children")[0].Body; !strings.Contains(got, `"password":"rpw"`) {
		t.Fatalf("attach body %s", got)
	}

	for _, bad := range []struct{ stdin, why string }{
		{"", "empty"},
		{"\n", "empty"},
		{strings.Repeat("x", maxSecretBytes+1), "longer than"},
	} {
		r := runCLI(context.Background(), testApp(env), bad.stdin, "user", "add", "bob", "--user-password-file", "-")
		if r.code != 1 || !strings.Contains(r.stderr, bad.why) {
			t.Errorf("stdin %.10q: %+v", bad.stdin, r)
		}
	}
	r := runCLI(context.Background(), testApp(env), "", "user", "add", "bob", "--user-password-file", filepath.Join(t.TempDir(), "missing"))
	if r.code != 1 || !strings.Contains(r.stderr, "--user-password-file") {
		t.Fatalf("missing file: %+v", r)
	}
	if n := len(f.callsTo("POST", "/v1/users")); n != 0 {
		t.Fatalf("%d user creations with a bad password input", n)
	}
}
