// Package remote_test proves remote children (docs/internals/fanout.md §13, docs/fanout.md
// "Remote children") with two real clusters on loopback: a three-node source whose parent topic
// is copied by a remote link into a topic of a two-node target cluster that runs with security
// on. The scenario kills -9 a source owner mid-stream, freezes (SIGSTOP) the whole target for
// 30 s, deletes and recreates the target topic and changes the link user's password, and checks
// the states the children listing reports on the way; it ends by reading both topics in full:
// every record the parent answered 202 is on the target at least once, keys arrive unchanged,
// and each key's first copies keep the parent's order.
//
// Nodes run with --heartbeat-interval 1s --heartbeat-timeout 5s. Logs of a failed run (of every
// run with NARAD_TEST_KEEP_LOGS=1) are kept in $NARAD_TEST_LOGS (default
// $TMPDIR/narad-remote-logs)/<cluster>-<unix time>.
package remote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestRemote(t *testing.T) {
	suite.Run(t, "narad remote children (two clusters)")
}

// Target cluster credentials. The admin is seeded at the target's first start; the link user
// gets only the produce grant on the target topics, as docs/fanout.md says is enough.
const (
	targetAdminPassword = "target-Admin-pw-1"
	linkUser            = "replicator"
	linkPassword        = "link-Secret-pw-7" // also grepped for in every node log: never logged
	wrongPassword       = "not-the-password"
	changedPassword     = "changed-Secret-pw-9"
	targetTopicPattern  = "rc-*" // the link user's produce grant
)

// ctx returns a context bounded to d, cancelled when the spec ends.
func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

func logf(format string, args ...any) {
	GinkgoWriter.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// pair is the two clusters every spec of the suite shares.
type pair struct {
	src, dst *harness.Cluster
}

// startPair starts the source (3 nodes, security off) and the target (2 nodes, security on,
// admin credentials in its clients) at the same time. Each node gets its own 127.0.0.x
// address (harness.NextHost), so the two clusters never share one. The cleanup keeps the logs
// when a spec failed.
func startPair(failed func() bool) *pair {
	GinkgoHelper()
	src, err := harness.NewCluster(harness.ClusterOptions{N: 3, Logf: prefixed("source")})
	Expect(err).NotTo(HaveOccurred())
	// Two nodes keep one Raft voter: the controller promotes joiners only to an odd voter count.
	dst, err := harness.NewCluster(harness.ClusterOptions{N: 2, Voters: 1, Logf: prefixed("target"),
		Args:          []string{"--security-enabled=true"},
		Env:           []string{"NARAD_ADMIN_PASSWORD=" + targetAdminPassword},
		ClientOptions: []client.Option{client.WithBasicAuth("admin", targetAdminPassword)},
	})
	if err != nil {
		src.Cleanup()
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		for name, c := range map[string]*harness.Cluster{"source": src, "target": dst} {
			unexpected := c.Unexpected()
			if failed() || len(unexpected) > 0 || os.Getenv("NARAD_TEST_KEEP_LOGS") == "1" {
				root := os.Getenv("NARAD_TEST_LOGS")
				if root == "" {
					root = filepath.Join(os.TempDir(), "narad-remote-logs")
				}
				dir := filepath.Join(root, fmt.Sprintf("%s-%d", name, time.Now().Unix()))
				if err := c.SaveLogs(dir); err != nil {
					GinkgoWriter.Printf("saving %s logs: %v\n", name, err)
				}
				GinkgoWriter.Printf("full %s node logs in %s\n%s", name, dir, c.Tails(30))
			}
			c.Cleanup()
			Expect(unexpected).To(BeEmpty(), "%s nodes exited although no spec killed them", name)
		}
	})
	began := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range []*harness.Cluster{src, dst} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			errs[i] = c.Start(sctx)
		}()
	}
	wg.Wait()
	Expect(errs[0]).NotTo(HaveOccurred(), "source cluster start")
	Expect(errs[1]).NotTo(HaveOccurred(), "target cluster start")
	AddReportEntry("clusters start", fmt.Sprintf("3 + 2 nodes in %s", time.Since(began).Round(time.Millisecond)))
	return &pair{src: src, dst: dst}
}

func prefixed(name string) func(string, ...any) {
	return func(format string, args ...any) { logf(name+" "+format, args...) }
}
