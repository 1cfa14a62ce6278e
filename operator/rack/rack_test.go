package rack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func fakeClient(nodes ...*corev1.Node) ctrlclient.Reader {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme)
	for _, n := range nodes {
		b = b.WithObjects(n)
	}
	return b.Build()
}

func TestRunWritesTheZoneElseTheNodeName(t *testing.T) {
	c := fakeClient(node("kw-1", map[string]string{ZoneLabel: "eu-west-1a"}), node("kw-2.example.com", nil))
	for _, tc := range []struct{ node, want string }{{"kw-1", "eu-west-1a"}, {"kw-2.example.com", "kw-2.example.com"}} {
		path := filepath.Join(t.TempDir(), FileName)
		var out bytes.Buffer
		env := func(k string) string {
			if k == NodeNameEnv {
				return tc.node
			}
			return ""
		}
		if err := Run(context.Background(), []string{"--file", path}, env, func() (ctrlclient.Reader, error) { return c, nil }, &out); err != nil {
			t.Fatalf("%s: %v", tc.node, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != tc.want+"\n" {
			t.Fatalf("%s: rack file %q (%v), want %q", tc.node, got, err, tc.want)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%s: output %q lacks the rack", tc.node, out.String())
		}
	}
}

func TestRunFailsWithoutANodeOrForAMissingOne(t *testing.T) {
	none := func(string) string { return "" }
	called := false
	newClient := func() (ctrlclient.Reader, error) { called = true; return fakeClient(), nil }
	if err := Run(context.Background(), nil, none, newClient, &bytes.Buffer{}); !errors.Is(err, ErrNoNodeName) || called {
		t.Fatalf("no node name: %v (client made: %v)", err, called)
	}
	path := filepath.Join(t.TempDir(), FileName)
	err := Run(context.Background(), []string{"--node-name=gone", "--file=" + path}, none, newClient, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("missing node: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a rack file was written for a missing node: %v", err)
	}
	if err := Run(context.Background(), []string{"extra"}, none, newClient, &bytes.Buffer{}); err == nil {
		t.Fatal("a stray argument was accepted")
	}
}
