// Package testsupport locates what the operator's test suites share on the machine: the
// repository root (the directory holding go.work) and envtest's kube-apiserver and etcd. The
// operator's own tests and the suites of the test module (chart, pod runner, end to end) all
// start their API servers from here.
package testsupport

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot is the nearest directory at or above the working directory holding go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// EnvtestAssets returns the directory of the envtest binaries (kube-apiserver, etcd):
// $KUBEBUILDER_ASSETS when set, else what the repository's hack/setup-envtest.sh prints (it
// builds them from the Go module proxy on first use and caches them).
func EnvtestAssets() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", "setup-envtest.sh"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/setup-envtest.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return "", fmt.Errorf("hack/setup-envtest.sh printed %q: %w", dir, err)
	}
	return dir, nil
}
