// Package startup_test proves that `narad serve` refuses a bad configuration up front: it
// exits non-zero with one clear line naming the offending field, and that a valid config file is honoured (the positive control that makes the
// refusals meaningful).
package startup_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/broker/client"
	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestStartup(t *testing.T) {
	suite.Run(t, "narad serve configuration checks")
}

// configFile writes a config file named name with content into a spec-scoped temp dir.
func configFile(dir, name, content string) string {
	GinkgoHelper()
	p := filepath.Join(dir, name)
	Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
	return p
}

var _ = Describe("narad serve configuration", func() {
	DescribeTable("exits non-zero with one line naming the bad field",
		func(field string, env []string, args []string, files map[string]string) {
			bin, err := harness.Binary()
			Expect(err).NotTo(HaveOccurred())
			dir := GinkgoT().TempDir()
			for name, content := range files {
				configFile(dir, name, content)
			}
			host := harness.NextHost()
			dataDir := filepath.Join(dir, "data")
			full := []string{"serve", "--dev", "--data-dir", dataDir,
				"--http-addr", host + ":0", "--cluster-addr", host + ":0"}
			for _, a := range args {
				full = append(full, strings.ReplaceAll(a, "{dir}", dir))
			}
			c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cmd := exec.CommandContext(c, bin, full...)
			cmd.Env = append(os.Environ(), env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err = cmd.Run()
			Expect(c.Err()).NotTo(HaveOccurred(), "narad kept running with a bad configuration:\n%s", out.String())
			var ee *exec.ExitError
			Expect(err).To(BeAssignableToTypeOf(ee), "narad must exit non-zero; output:\n%s", out.String())
			Expect(err.(*exec.ExitError).ExitCode()).To(BeNumerically(">", 0))

			var lines []string
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.TrimSpace(l) != "" {
					lines = append(lines, l)
				}
			}
			Expect(lines).To(HaveLen(1), "exactly one line of output:\n%s", out.String())
			Expect(lines[0]).To(HavePrefix("narad: "))
			Expect(lines[0]).To(ContainSubstring(field), "the line names the field")
		},
		Entry("long-poll ceiling above the write timeout (flag)", "max-consume-wait", nil, []string{"--max-consume-wait", "40s"}, nil),
		Entry("long-poll ceiling above the write timeout (env)", "max-consume-wait", []string{"NARAD_MAX_CONSUME_WAIT=40s"}, nil, nil),
		Entry("long-poll ceiling above the shutdown grace", "max-consume-wait", nil, []string{"--shutdown-grace", "1s"}, nil),
		Entry("duration that does not parse", "max-consume-wait", nil, []string{"--max-consume-wait", "soon"}, nil),
		Entry("unknown codec", "storage-codec", nil, []string{"--storage-codec", "lz4"}, nil),
		Entry("unknown compression level", "storage-compression-level", nil, []string{"--storage-compression-level", "ultra"}, nil),
		Entry("default partitions below 3", "topic-default-partitions", nil, []string{"--topic-default-partitions", "2"}, nil),
		Entry("max partitions above 108", "topic-max-partitions", nil, []string{"--topic-max-partitions", "200"}, nil),
		Entry("default retention under an hour", "topic-default-retention-ms", nil, []string{"--topic-default-retention-ms", "5"}, nil),
		Entry("unknown log level", "log-level", nil, []string{"--log-level", "loud"}, nil),
		Entry("unknown log format", "log-format", nil, []string{"--log-format", "xml"}, nil),
		Entry("listen address that is not host:port", "http-addr", nil, []string{"--http-addr", "nonsense"}, nil),
		Entry("admin password over 72 bytes", "admin-password", nil,
			[]string{"--security-enabled=true", "--admin-password", strings.Repeat("p", 73)}, nil),
		Entry("unknown flag", "--no-such-flag", nil, []string{"--no-such-flag"}, nil),
		Entry("config file with an unknown key (YAML)", "bogus-key", nil, []string{"--config", "{dir}/c.yaml"},
			map[string]string{"c.yaml": "bogus-key: 1\n"}),
		Entry("config file with an unknown key (JSON)", "http-adr", nil, []string{"--config", "{dir}/c.json"},
			map[string]string{"c.json": `{"http-adr": "127.0.0.1:1"}`}),
		Entry("config file with a bad value", "max-consume-wait", nil, []string{"--config", "{dir}/c.yaml"},
			map[string]string{"c.yaml": "max-consume-wait: banana\n"}),
		Entry("config file carrying the cluster secret", "cluster-secret", nil, []string{"--config", "{dir}/c.yaml"},
			map[string]string{"c.yaml": "cluster-secret: hunter2\n"}),
		Entry("config file that does not exist", "missing.yaml", nil, []string{"--config", "{dir}/missing.yaml"}, nil),
	)

	It("honours a valid config file (max-consume-wait from the file clamps a long poll)", func() {
		dir := GinkgoT().TempDir()
		cfg := configFile(dir, "narad.yaml", "max-consume-wait: 1s\nlog-level: debug\n")
		n, err := harness.NewNode(harness.Options{ID: "n1", Dev: true, Args: []string{"--config", cfg}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(n.Cleanup)
		Expect(n.StartReady()).To(Succeed())
		c := n.Client()
		c2, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = c.CreateTopic(c2, client.CreateTopicRequest{Name: "clamped"})
		Expect(err).NotTo(HaveOccurred())
		began := time.Now()
		msgs, err := c.Consume(c2, "clamped", client.ConsumeOptions{Wait: 8 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		Expect(msgs).To(BeEmpty())
		Expect(time.Since(began)).To(BeNumerically("<", 4*time.Second), "the 8 s wait is clamped to the file's 1 s ceiling")
		Expect(time.Since(began)).To(BeNumerically(">=", 900*time.Millisecond))
	})
})
