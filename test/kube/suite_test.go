// Package kube is the operator's real-cluster suite: the narad-operator chart installed with
// the Helm SDK into the single-node cluster of hack/kube-up.sh (a real kubelet, StatefulSet
// controller, scheduler, kube-proxy, CoreDNS and local PersistentVolumes), the narad and
// operator images built from the tree, and objects applied with kubectl as a user would.
// Where test/operator/e2e's pod runner imitates the kubelet, this suite has the real one.
//
// It needs the cluster up; `make e2e-kube` starts it (building what it lacks) and runs the
// suite. By hand, as root, from the repository root:
//
//	make kube-up && cd test && go test -count=1 -timeout 30m -v ./kube/
//
// NARAD_KUBE_DIR names the cluster's state directory (default: .narad/kube at the root).
// docs/internals/kube-test-cluster.md §6 lists the specs and what the real cluster showed.
package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	"narad.dev/operator/manager"
	"narad.dev/operator/testsupport/suite"
)

// The cluster of hack/kube-up.sh, found in BeforeSuite.
var (
	root       string            // the repository root
	stateDir   string            // the cluster's state directory
	kubeconfig string            // its admin kubeconfig
	kubeBin    string            // the directory of its kubectl and kubernetes binaries
	cfg        *rest.Config      // admin
	k8s        ctrlclient.Client // uncached: every read is the API server's current state
)

func TestRealCluster(t *testing.T) {
	suite.Run(t, "operator on a real single-node cluster")
}

var _ = BeforeSuite(func() {
	var err error
	root, err = filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	stateDir = os.Getenv("NARAD_KUBE_DIR")
	if stateDir == "" {
		stateDir = filepath.Join(root, ".narad", "kube")
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "kube-bin"))
	Expect(err).NotTo(HaveOccurred(), "no cluster in %s: run `make e2e-kube` (or make kube-up first)", stateDir)
	kubeBin = strings.TrimSpace(string(b))
	kubeconfig = filepath.Join(stateDir, "admin.kubeconfig")
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = ctrlclient.New(cfg, ctrlclient.Options{Scheme: manager.NewScheme()})
	Expect(err).NotTo(HaveOccurred())

	// The node must be Ready now: this suite starts nothing of the cluster itself.
	var nodes corev1.NodeList
	Expect(k8s.List(context.Background(), &nodes)).To(Succeed())
	Expect(nodes.Items).To(HaveLen(1), "a single-node cluster")
	Expect(nodeReady(&nodes.Items[0])).To(BeTrue(), "node %s is not Ready: make kube-up", nodes.Items[0].Name)
	SetDefaultEventuallyPollingInterval(500 * time.Millisecond)
})

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
