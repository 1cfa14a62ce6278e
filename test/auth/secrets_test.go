package auth_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/test/harness"
)

// cmdlineOf returns the NUL-separated arguments of the narad process serving httpAddr, read
// from /proc the way ps reads them.
func cmdlineOf(httpAddr string) string {
	GinkgoHelper()
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte("\x00--http-addr\x00"+httpAddr+"\x00")) {
			return string(b)
		}
	}
	Fail("no process serves " + httpAddr)
	return ""
}

var _ = Describe("Secrets", func() {
	It("keeps the cluster secret and admin password out of the process arguments and pprof", func() {
		const secret, password = "cluster-Secret-in-env-1", "admin-Secret-in-env-2"
		host := harness.NextHost()
		port, err := harness.FreePort(host)
		Expect(err).NotTo(HaveOccurred())
		pprofAddr := net.JoinHostPort(host, fmt.Sprint(port))
		n, err := harness.NewNode(harness.Options{ID: "n1", AdminPassword: password,
			Env: []string{"NARAD_CLUSTER_SECRET=" + secret}, Args: []string{"--pprof-addr", pprofAddr}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(n.Cleanup)
		Expect(n.StartReady()).To(Succeed())

		args := cmdlineOf(n.HTTPAddr)
		Expect(args).To(ContainSubstring("serve"))
		Expect(args).NotTo(ContainSubstring(secret))
		Expect(args).NotTo(ContainSubstring(password))

		get := func(path, user, pass string) int {
			req, err := http.NewRequestWithContext(ctx(10*time.Second), http.MethodGet, "http://"+pprofAddr+path, nil)
			Expect(err).NotTo(HaveOccurred())
			if user != "" {
				req.SetBasicAuth(user, pass)
			}
			var resp *http.Response
			Eventually(func() error { resp, err = http.DefaultClient.Do(req); return err }).
				WithTimeout(10 * time.Second).Should(Succeed())
			resp.Body.Close()
			return resp.StatusCode
		}
		Expect(get("/debug/pprof/", "", "")).To(Equal(http.StatusUnauthorized))
		Expect(get("/debug/pprof/cmdline", "", "")).To(Equal(http.StatusUnauthorized))
		Expect(get("/debug/pprof/heap", "admin", "wrong")).To(Equal(http.StatusUnauthorized))
		Expect(get("/debug/pprof/", "admin", password)).To(Equal(http.StatusOK))
		Expect(get("/debug/pprof/cmdline", "admin", password)).To(Equal(http.StatusNotFound))
	})

	It("accepts the secret flags with --dev, warning loudly that ps shows them", func() {
		n, err := harness.NewNode(harness.Options{ID: "n1", Dev: true,
			Args: []string{"--cluster-secret", "Dev-Flag-Secret-4", "--admin-password", "Dev-Flag-Secret-5"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(n.Cleanup)
		Expect(n.StartReady()).To(Succeed())
		logText, err := os.ReadFile(n.LogPath)
		Expect(err).NotTo(HaveOccurred())
		var warned []string
		for _, l := range strings.Split(string(logText), "\n") {
			if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, "ps and /proc/<pid>/cmdline") {
				warned = append(warned, l)
			}
		}
		Expect(warned).To(HaveLen(2), "one warning per secret flag:\n%s", logText)
		Expect(warned[0]).To(ContainSubstring("--admin-password"))
		Expect(warned[1]).To(ContainSubstring("--cluster-secret"))
		Expect(string(logText)).NotTo(ContainSubstring("Dev-Flag-Secret"))
	})

	DescribeTable("refuses a secret given as a flag outside --dev, naming the field",
		func(flag string) {
			bin, err := harness.Binary()
			Expect(err).NotTo(HaveOccurred())
			host := harness.NextHost()
			c, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			out, err := exec.CommandContext(c, bin, "serve", "--data-dir", GinkgoT().TempDir(),
				"--http-addr", host+":0", "--cluster-addr", host+":0", "--"+flag, "Flag-Secret-3").CombinedOutput()
			Expect(c.Err()).NotTo(HaveOccurred(), "narad kept running:\n%s", out)
			Expect(err).To(HaveOccurred(), "narad must refuse; output:\n%s", out)
			Expect(string(out)).To(ContainSubstring("config: " + flag + ": "))
			Expect(string(out)).To(ContainSubstring("--" + flag + "-file"))
			Expect(string(out)).NotTo(ContainSubstring("Flag-Secret-3"))
			Expect(strings.Count(strings.TrimSpace(string(out)), "\n")).To(BeZero(), "one line:\n%s", out)
		},
		Entry("cluster secret", "cluster-secret"),
		Entry("admin password", "admin-password"),
	)
})
