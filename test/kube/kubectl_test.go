package kube

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kubectl runs the cluster's kubectl as its admin with stdin, and returns its stdout; a
// non-zero exit is an error carrying stderr.
func kubectl(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"),
		append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// apply is `kubectl apply -f -` of manifest in namespace ns.
func apply(ns, manifest string) error {
	_, err := kubectl(manifest, "-n", ns, "apply", "-f", "-")
	return err
}
