// Package limits_test is the black-box suite of the connection limits of both ports and of
// the cluster-port handshake (docs/operating.md "Connection limits", docs/cluster.md
// "Cluster security") against real narad processes: idle connection floods, unauthenticated
// gRPC traffic and replayed handshakes.
package limits_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"narad.dev/operator/testsupport/suite"
	"narad.dev/test/harness"
)

func TestLimits(t *testing.T) {
	suite.Run(t, "narad connection limits and cluster handshake")
}

const rootPassword = "root-Secret-1"

// Attackers connect from addresses no harness node uses (nodes live on 127.0.0.x), so
// their per-IP caps are theirs alone; real clients connect from 127.0.0.1.
const (
	httpAttacker    = "127.0.1.2"
	clusterAttacker = "127.0.1.3"
	grpcAttacker    = "127.0.1.4"
	prefaceAttacker = "127.0.1.5"
)

func ctx(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	DeferCleanup(cancel)
	return c
}

func logf(format string, args ...any) {
	GinkgoWriter.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// dialFrom opens n TCP connections from the source IP src to addr, writes hello (if any) on
// each, and closes them all when the spec ends. Connections the server closes at once are
// kept too: they are what the caps refuse.
func dialFrom(src, addr string, n int, hello []byte) []net.Conn {
	GinkgoHelper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conns := make([]net.Conn, 0, n)
	DeferCleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := d.Dial("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		conns = append(conns, c)
		if len(hello) > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write(hello)
		}
	}
	return conns
}

// allClosedByPeer waits until the server has closed every connection, at most d overall.
func allClosedByPeer(conns []net.Conn, d time.Duration) (open int) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			buf := make([]byte, 256)
			for {
				if _, err := c.Read(buf); err != nil {
					if ne, ok := err.(net.Error); ok && ne.Timeout() {
						mu.Lock()
						open++
						mu.Unlock()
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return open
}

// metric reads one sample sum of the node's /metrics (0 when absent, which fails the
// callers' lower bounds).
func metric(baseURL, name string, labels map[string]string) float64 {
	GinkgoHelper()
	exp, err := harness.ScrapeMetrics(ctx(10*time.Second), baseURL)
	Expect(err).NotTo(HaveOccurred())
	v, _ := exp.Value(name, labels)
	return v
}

// rssBytes is the resident set size of process pid (VmRSS of /proc/<pid>/status).
func rssBytes(pid int) int64 {
	GinkgoHelper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	Expect(err).NotTo(HaveOccurred())
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			return kb << 10
		}
	}
	Fail("no VmRSS in /proc/<pid>/status")
	return 0
}

// The cluster handshake as docs/cluster.md describes it, written out independently of the
// broker's code: client hello, server nonce and proof, client proof, one accept byte.
const (
	grpcTag          = 0x02
	handshakeVersion = 2
	handshakeContext = "narad-cluster-handshake-v2"
)

func handshakeMAC(secret []byte, role byte, cn, sn []byte, id string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(handshakeContext))
	m.Write([]byte{0, grpcTag})
	m.Write(cn)
	m.Write(sn)
	m.Write([]byte{byte(len(id))})
	m.Write([]byte(id))
	m.Write([]byte{0}) // no TLS channel binding
	m.Write([]byte{role})
	return m.Sum(nil)
}

// clientHandshake authenticates a plaintext gRPC connection with secret, as node id.
func clientHandshake(c net.Conn, secret []byte, id string) error {
	cn := make([]byte, 32)
	_, _ = rand.Read(cn)
	hello := append([]byte{grpcTag, handshakeVersion}, cn...)
	hello = append(hello, byte(len(id)))
	hello = append(hello, id...)
	if _, err := c.Write(hello); err != nil {
		return err
	}
	reply := make([]byte, 1+32+32)
	if _, err := io.ReadFull(c, reply); err != nil {
		return err
	}
	sn := reply[1:33]
	if !hmac.Equal(reply[33:], handshakeMAC(secret, 'S', cn, sn, id)) {
		return fmt.Errorf("server proof does not match")
	}
	if _, err := c.Write(handshakeMAC(secret, 'C', cn, sn, id)); err != nil {
		return err
	}
	ack := make([]byte, 1)
	if _, err := io.ReadFull(c, ack); err != nil || ack[0] != 1 {
		return fmt.Errorf("handshake not accepted: %v", err)
	}
	return nil
}
