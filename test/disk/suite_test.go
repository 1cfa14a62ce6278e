// Package disk_test proves the storage-failure rule with real processes on real filesystems:
// when the data directory's disk is full or becomes unwritable, produce answers 503 with a JSON
// error body, the process stays alive, nothing that was answered 202 is lost, and the node takes
// traffic again once the disk is usable. A tmpfs whose size is changed under the running node
// plays the full disk; an ext4 image the kernel forces read-only plays the unwritable one.
// Needs root on Linux (mount).
package disk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestDisk(t *testing.T) {
	suite.Run(t, "narad full and unwritable disk")
}

// ctx returns a context bounded to d, cancelled when the spec ends.
func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

// mountTmpfs mounts a sizeMiB tmpfs, unmounted when the spec ends (after the node's cleanup,
// which is registered later and so runs first).
func mountTmpfs(sizeMiB int) *harness.Tmpfs {
	GinkgoHelper()
	t, err := harness.MountTmpfs(sizeMiB)
	Expect(err).NotTo(HaveOccurred(), "tests of this suite run as root on Linux and mount tmpfs")
	DeferCleanup(func() { Expect(t.Unmount()).To(Succeed()) })
	return t
}

// mountExt4 creates and loop-mounts a sizeMiB ext4 image, removed when the spec ends.
func mountExt4(sizeMiB int) *harness.Ext4Image {
	GinkgoHelper()
	e, err := harness.MountExt4Image(sizeMiB)
	Expect(err).NotTo(HaveOccurred(), "tests of this suite run as root on Linux with loop devices")
	DeferCleanup(func() { Expect(e.Remove()).To(Succeed()) })
	return e
}

// newNodeOn prepares a dev-mode node whose data lives under dir (dir/data). Its log goes to a
// directory off that disk, so a full or read-only disk cannot swallow it. The process is
// killed when the spec ends; on failure the log's error lines and tail are printed.
func newNodeOn(dir string) *harness.Node {
	GinkgoHelper()
	n, err := harness.NewNode(harness.Options{ID: "n1", Dev: true, DataDir: dir})
	Expect(err).NotTo(HaveOccurred())
	logDir, err := os.MkdirTemp("", "narad-disk-log-")
	Expect(err).NotTo(HaveOccurred())
	n.LogPath = filepath.Join(logDir, "narad.log")
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("node log (error lines, then tail):\n%s\n---\n%s\n", errorLines(n, 20), n.Tail(30))
		}
		n.Kill()
		_ = os.RemoveAll(logDir)
	})
	return n
}

// startReady starts n and waits until it is ready.
func startReady(n *harness.Node) *client.Client {
	GinkgoHelper()
	Expect(n.StartReady()).To(Succeed())
	return n.Client()
}

// createTopic creates a default 3-partition topic.
func createTopic(c *client.Client, name string) {
	GinkgoHelper()
	_, err := c.CreateTopic(ctx(10*time.Second), client.CreateTopicRequest{Name: name})
	Expect(err).NotTo(HaveOccurred())
}

// expectAliveAndHealthy asserts the process still runs and /healthz answers 200.
func expectAliveAndHealthy(n *harness.Node, c *client.Client) {
	GinkgoHelper()
	Expect(n.Running()).To(BeTrue(), "the node must survive a storage failure\n%s", n.Tail(20))
	status, err := c.Healthz(ctx(5 * time.Second))
	Expect(err).NotTo(HaveOccurred(), "/healthz must stay 200 while the disk is unusable")
	Expect(status).To(Equal("ok"))
}

// expectOnly503s asserts the load saw at least one 503, every 503 carried a JSON error body,
// and no produce got anything but 202 or 503 (a 500, a hang or a dropped connection breaks the
// rule).
func expectOnly503s(out *Outcome) {
	GinkgoHelper()
	s := out.Snapshot()
	Expect(s.Unavailable).To(BeNumerically(">=", 1), "a produce on an unusable disk must answer 503 (%s)", s)
	Expect(s.BadBodies).To(BeEmpty(), "every 503 must carry a JSON error body")
	Expect(s.Other).To(BeEmpty(), "a produce on an unusable disk answers 202 or 503, nothing else")
}

// eventuallyAccepted produces unique payloads "<prefix>-<seq>" until one is answered 202
// (within timeout) and files every outcome in out.
func eventuallyAccepted(n *harness.Node, topic, prefix string, out *Outcome, timeout time.Duration) {
	GinkgoHelper()
	p := NewProducer(n.URL(), topic, prefix, 1024)
	defer p.Close()
	Eventually(func() int {
		return p.Once(out)
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Equal(202),
		"produce must be answered 202 again once the disk is usable\n%s", n.Tail(20))
	Expect(out.Snapshot().Other).To(BeEmpty(), "while the node recovers, produce answers 202 or 503, nothing else")
}

// drainAndExpectDelivered drains topic (consume + ack) until every payload in want was
// delivered (or 30 s pass) and asserts none is missing and none came back altered.
func drainAndExpectDelivered(label string, c *client.Client, topic string, want map[string]bool) {
	GinkgoHelper()
	tally := newTally()
	ds, err := harness.Drain(ctx(60*time.Second), c, topic, harness.DrainOptions{
		Quiet: time.Second, Limit: 30 * time.Second,
		Done: func(got []harness.Delivery) bool {
			tally.add(got)
			return len(tally.missing(want)) == 0
		},
	})
	if err != nil {
		GinkgoWriter.Printf("drain ended with: %v\n", err)
	}
	tally.add(ds)
	miss := tally.missing(want)
	extra, dups := 0, 0
	for id, k := range tally.delivered {
		if !want[id] {
			extra++
		}
		if k > 1 {
			dups += k - 1
		}
	}
	report := fmt.Sprintf("%s: %d payloads answered 202, %d deliveries, %d distinct, %d duplicate deliveries, %d delivered without a 202 (503'd or in flight: allowed), %d missing, %d altered",
		label, len(want), len(ds), len(tally.delivered), dups, extra, len(miss), len(tally.altered))
	GinkgoWriter.Println(report)
	AddReportEntry(label, report)
	Expect(tally.altered).To(BeEmpty(), "every delivered payload comes back byte for byte (%s)", report)
	if len(miss) > 10 {
		miss = miss[:10]
	}
	Expect(miss).To(BeEmpty(), "every payload answered 202 must be delivered (%s)", report)
}

// tally counts deliveries per payload id, fed the growing delivery list of a drain.
type tally struct {
	seen      int            // deliveries already counted
	delivered map[string]int // id → deliveries
	altered   []string       // positions whose payload is not what makePayload gives
}

func newTally() *tally { return &tally{delivered: map[string]int{}} }

// add counts the deliveries of got not counted yet (got only grows).
func (t *tally) add(got []harness.Delivery) {
	for _, d := range got[t.seen:] {
		id, ok := PayloadID(d.Payload)
		if !ok {
			t.altered = append(t.altered, fmt.Sprintf("p%d@%d (%d bytes)", d.Partition, d.Offset, len(d.Payload)))
			continue
		}
		t.delivered[id]++
	}
	t.seen = len(got)
}

// missing returns the ids of want (sorted) not delivered yet.
func (t *tally) missing(want map[string]bool) []string {
	var out []string
	for id := range want {
		if t.delivered[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
