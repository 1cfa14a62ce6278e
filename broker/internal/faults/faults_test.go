package faults

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// childEnv names the mode of a re-executed test binary (see TestMain).
const childEnv = "NARAD_FAULTS_TEST_CHILD"

// TestMain doubles as the child process of the crash tests: with childEnv set, it hits point
// "x" three times, printing before each hit, and exits 0 if it survives. NARAD_FAULTS was
// parsed by init before this runs, exactly as in a real narad process.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "check" {
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(os.Stdout, "hit %d\n", i)
			if err := Check("x"); err != nil {
				fmt.Fprintf(os.Stdout, "err %v\n", err)
			}
		}
		fmt.Fprintln(os.Stdout, "survived")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func reset(t *testing.T) {
	Reset()
	t.Cleanup(Reset)
}

func TestUnarmedPointsReturnNil(t *testing.T) {
	reset(t)
	for i := 0; i < 3; i++ {
		if err := Check("wal.fsync"); err != nil {
			t.Fatalf("unarmed point returned %v", err)
		}
	}
	Set("other", nil)
	if err := Check("wal.fsync"); err != nil {
		t.Fatalf("arming another point made this one fire: %v", err)
	}
}

func TestSetFiresOnEveryHitUntilCleared(t *testing.T) {
	reset(t)
	disk := errors.New("no space left on device")
	Set("a", disk)
	Set("b", nil)
	for i := 0; i < 3; i++ {
		if err := Check("a"); err != disk {
			t.Fatalf("hit %d of a: %v, want the armed error", i+1, err)
		}
		if err := Check("b"); !errors.Is(err, ErrInjected) {
			t.Fatalf("hit %d of b (armed with nil): %v, want ErrInjected", i+1, err)
		}
	}
	Clear("a")
	if err := Check("a"); err != nil {
		t.Fatalf("cleared point returned %v", err)
	}
	if err := Check("b"); !errors.Is(err, ErrInjected) {
		t.Fatalf("clearing a disarmed b: %v", err)
	}
	Clear("b")
	if armed.Load() {
		t.Fatal("armed flag still set with no point armed")
	}
	Clear("never-armed") // no-op
}

func TestResetDisarmsEveryPoint(t *testing.T) {
	reset(t)
	Set("a", nil)
	SetNth("b", 1, nil)
	Reset()
	for _, p := range []string{"a", "b"} {
		if err := Check(p); err != nil {
			t.Fatalf("%s after Reset: %v", p, err)
		}
	}
}

func TestSetNthFiresOnlyOnTheNthHit(t *testing.T) {
	reset(t)
	SetNth("a", 3, nil)
	for hit := 1; hit <= 6; hit++ {
		err := Check("a")
		if want := hit == 3; (err != nil) != want {
			t.Fatalf("hit %d: %v, want fire=%v", hit, err, want)
		}
	}
	// Re-arming starts counting again.
	SetNth("a", 1, errors.New("boom"))
	if err := Check("a"); err == nil || err.Error() != "boom" {
		t.Fatalf("first hit after re-arm: %v, want boom", err)
	}
	if err := Check("a"); err != nil {
		t.Fatalf("second hit after re-arm: %v", err)
	}
}

// armedAs is the expected kind and hit number of an armed point.
type armedAs struct {
	kind string
	nth  int64
}

func TestParseAcceptsTheDocumentedSpecAndRejectsBadOnes(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		wantErr bool
		want    map[string]armedAs // kind and nth of each armed point
	}{
		{spec: "a=error", want: map[string]armedAs{"a": {kind: "error"}}},
		{spec: "wal.after_fsync=crash,log.before_hwm_persist=error",
			want: map[string]armedAs{"wal.after_fsync": {kind: "crash"}, "log.before_hwm_persist": {kind: "error"}}},
		{spec: " a=error@2 , b=crash@10 ,", want: map[string]armedAs{"a": {kind: "error", nth: 2}, "b": {kind: "crash", nth: 10}}},
		{spec: ",,", want: map[string]armedAs{}},
		{spec: "a", wantErr: true},
		{spec: "a=boom", wantErr: true},
		{spec: "a=Error", wantErr: true},
		{spec: "a=error@0", wantErr: true},
		{spec: "a=error@-1", wantErr: true},
		{spec: "a=error@x", wantErr: true},
		{spec: "a=error@", wantErr: true},
		{spec: "a=error,b", wantErr: true},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			reset(t)
			err := parse(tc.spec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parse(%q) = %v, wantErr %v", tc.spec, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			mu.RLock()
			defer mu.RUnlock()
			if len(points) != len(tc.want) {
				t.Fatalf("armed %d points, want %d", len(points), len(tc.want))
			}
			for name, w := range tc.want {
				a := points[name]
				if a == nil || a.kind != w.kind || a.nth != w.nth || !errors.Is(a.err, ErrInjected) {
					t.Fatalf("point %q: %+v, want kind %s nth %d", name, a, w.kind, w.nth)
				}
			}
		})
	}
}

// runChild re-executes the test binary as a child hitting point "x" three times under spec.
func runChild(t *testing.T, spec string) (stdout, stderr string, ws syscall.WaitStatus) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	env := []string{childEnv + "=check", "NARAD_FAULTS=" + spec}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NARAD_FAULTS") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run child: %v", err)
	}
	return out.String(), errb.String(), cmd.ProcessState.Sys().(syscall.WaitStatus)
}

func TestCrashActionKillsTheProcessWithSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		wantOut    string
		wantKilled bool
	}{
		{"x=crash", "hit 1\n", true},
		{"x=crash@2", "hit 1\nhit 2\n", true},
		{"x=error@2", "hit 1\nhit 2\nerr injected fault\nhit 3\nsurvived\n", false},
		{"y=crash", "hit 1\nhit 2\nhit 3\nsurvived\n", false},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			out, errOut, ws := runChild(t, tc.spec)
			if out != tc.wantOut {
				t.Fatalf("child stdout %q, want %q (stderr %q)", out, tc.wantOut, errOut)
			}
			if tc.wantKilled {
				if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child wait status %v: want killed by SIGKILL", ws)
				}
				return
			}
			if ws.Signaled() || ws.ExitStatus() != 0 {
				t.Fatalf("child wait status %v, want a clean exit", ws)
			}
		})
	}
}

func TestBadNARADFAULTSStopsTheProcessAtStartup(t *testing.T) {
	out, errOut, ws := runChild(t, "x=explode")
	if ws.Signaled() || ws.ExitStatus() != 2 {
		t.Fatalf("wait status %v, want exit 2", ws)
	}
	if out != "" {
		t.Fatalf("the process ran past init: stdout %q", out)
	}
	if !strings.Contains(errOut, "NARAD_FAULTS") || !strings.Contains(errOut, "x=explode") {
		t.Fatalf("stderr %q does not name the variable and the bad item", errOut)
	}
}

// FuzzParse: any NARAD_FAULTS value either fails to parse or arms only well-formed points.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"a=error", "a=crash@3,b=error", " , ", "a", "a=error@0", "a=error@99999999999999999999", "=crash", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		Reset()
		defer Reset()
		if err := parse(spec); err != nil {
			return
		}
		mu.RLock()
		defer mu.RUnlock()
		for name, a := range points {
			if strings.Contains(name, ",") || (a.kind != "crash" && a.kind != "error") || a.nth < 0 || !errors.Is(a.err, ErrInjected) {
				t.Fatalf("parse(%q) armed %q as %+v", spec, name, a)
			}
		}
	})
}
