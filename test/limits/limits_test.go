package limits_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"narad.dev/broker/client"
	"narad.dev/test/harness"
)

// Default caps (docs/operating.md, "Connection limits").
const (
	httpPerIP    = 1024
	clusterPerIP = 256
	flood        = 1100
)

// http2Preface is an HTTP/2 client connection preface followed by an empty SETTINGS frame:
// what a gRPC client sends first.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// rawCodec sends and receives gRPC message bodies as given, so the suite needs no generated
// code of the node service.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func newNode(args ...string) *harness.Node {
	GinkgoHelper()
	n, err := harness.NewNode(harness.Options{ID: "n1", AdminPassword: rootPassword, Args: args})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(n.Cleanup)
	Expect(n.StartReady()).To(Succeed())
	return n
}

// produceAndConsume proves the node serves a real client: create a topic, produce, consume.
func produceAndConsume(c *client.Client, consumeFrom *client.Client) {
	GinkgoHelper()
	topic := fmt.Sprintf("limits-%d", time.Now().UnixNano())
	_, err := c.CreateTopic(ctx(30*time.Second), client.CreateTopicRequest{Name: topic})
	Expect(err).NotTo(HaveOccurred())
	Expect(c.Produce(ctx(30*time.Second), topic, []byte("1234"), client.ProduceOptions{})).To(Succeed())
	Eventually(func(g Gomega) {
		msgs, err := consumeFrom.Consume(ctx(10*time.Second), topic, client.ConsumeOptions{Wait: time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(msgs).To(HaveLen(1))
		g.Expect(string(msgs[0].Payload)).To(Equal("1234"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

var _ = Describe("the HTTP port", func() {
	It("keeps serving clients while one address holds 1,100 idle connections, refusing those over its per-IP cap", func() {
		n := newNode()
		dialFrom(httpAttacker, n.HTTPAddr, flood, nil)
		logf("%d idle connections opened from %s", flood, httpAttacker)
		produceAndConsume(n.Client(), n.Client())
		Expect(metric(n.URL(), "narad_connections_refused_total",
			map[string]string{"port": "http", "reason": "max_connections_per_ip"})).To(BeNumerically(">=", flood-httpPerIP))
	})
})

var _ = Describe("the cluster port", func() {
	It("closes 1,100 idle connections from one address and connections that sent only an HTTP/2 preface, and a cluster still forms and serves", func() {
		c, err := harness.NewCluster(harness.ClusterOptions{N: 1, Voters: 1, Logf: logf})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Cleanup)
		Expect(c.Start(ctx(2 * time.Minute))).To(Succeed())

		prefaces := dialFrom(prefaceAttacker, c.Node(0).ClusterAddr, 200, []byte(http2Preface))
		idle := dialFrom(clusterAttacker, c.Node(0).ClusterAddr, flood, nil)
		logf("%d idle connections opened from %s, %d preface-only from %s", len(idle), clusterAttacker, len(prefaces), prefaceAttacker)
		i, err := c.AddNode(ctx(2 * time.Minute))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.WaitMembers(ctx(time.Minute), "both nodes alive", func(l *client.MemberList) bool {
			alive := 0
			for _, m := range l.Members {
				if m.Status == client.StatusAlive {
					alive++
				}
			}
			return alive == 2
		})).To(Succeed())
		produceAndConsume(c.Client(i), c.Client(0))

		// None of them passes the handshake: every one is closed, a preface at its first byte,
		// idle ones within the per-IP cap by the handshake timeout (5 s), the rest at once.
		Expect(allClosedByPeer(prefaces, 30*time.Second)).To(Equal(0), "preface-only connections still open")
		Expect(allClosedByPeer(idle, 30*time.Second)).To(Equal(0), "idle connections still open")
		url := c.URL(0)
		Expect(metric(url, "narad_connections_refused_total",
			map[string]string{"port": "cluster", "reason": "max_connections_per_ip"})).To(BeNumerically(">=", flood-clusterPerIP))
		Expect(metric(url, "narad_cluster_auth_total", map[string]string{"outcome": "refused"})).To(BeNumerically(">=", 1))
		Expect(metric(url, "narad_cluster_auth_total", map[string]string{"outcome": "accepted"})).To(BeNumerically(">=", 1))
	})

	It("does not grow the node's memory for an unauthenticated client sending 16 MB gRPC messages on many streams", func() {
		n := newNode()
		before := rssBytes(n.PID())
		logf("RSS before: %d MB", before>>20)
		const conns, streams, size = 2, 16, 16 << 20

		// gRPC as an older node spoke it: HTTP/2 right away, a proof in metadata.
		var wg sync.WaitGroup
		for range conns {
			cc, err := grpc.NewClient(n.ClusterAddr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(grpcAttacker)}}
					return d.DialContext(ctx, "tcp", addr)
				}))
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(cc.Close)
			for range streams {
				wg.Go(func() {
					defer GinkgoRecover()
					cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					cctx = metadata.AppendToOutgoingContext(cctx, "x-narad-cluster-auth", "00")
					var out []byte
					body := make([]byte, size)
					err := cc.Invoke(cctx, "/narad.node.v1.Node/CommitProduceBatch", &body, &out,
						grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(size+1024))
					Expect(err).To(HaveOccurred())
				})
			}
		}
		// And as a client that starts a handshake, sends a wrong proof and keeps writing.
		junk := make([]byte, size)
		hello := append([]byte{grpcTag, handshakeVersion}, make([]byte, 32+1+32)...)
		for range conns * streams {
			wg.Go(func() {
				d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(grpcAttacker)}}
				c, err := d.Dial("tcp", n.ClusterAddr)
				if err != nil {
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				_, _ = c.Write(append(append(append([]byte(nil), hello...), http2Preface...), junk...))
				_, _ = io.Copy(io.Discard, c)
			})
		}
		wg.Wait()
		after := rssBytes(n.PID())
		logf("RSS after: %d MB", after>>20)
		Expect(after-before).To(BeNumerically("<", 150<<20), "RSS grew from %d MB to %d MB", before>>20, after>>20)
		Expect(n.Running()).To(BeTrue())
	})

	It("refuses a replayed handshake: the replayed connection gets no gRPC answer", func() {
		secret := "limits-suite-secret-0123456789"
		c, err := harness.NewCluster(harness.ClusterOptions{N: 1, Voters: 1, Secret: secret, Logf: logf})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Cleanup)
		Expect(c.Start(ctx(2 * time.Minute))).To(Succeed())
		addr := c.Node(0).ClusterAddr

		// A node that knows the secret makes one call; everything it writes is recorded.
		var rec recorder
		cc, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
				raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
				if err != nil {
					return nil, err
				}
				rc := &recordingConn{Conn: raw, rec: &rec}
				if err := clientHandshake(rc, []byte(secret), "replay-probe"); err != nil {
					raw.Close()
					return nil, err
				}
				return rc, nil
			}))
		Expect(err).NotTo(HaveOccurred())
		var out []byte
		empty := []byte{}
		Expect(cc.Invoke(ctx(10*time.Second), "/narad.node.v1.Node/NodeStatus", &empty, &out, grpc.ForceCodec(rawCodec{}))).To(Succeed())
		Expect(cc.Close()).To(Succeed())
		refusedBefore := metric(c.URL(0), "narad_cluster_auth_total", map[string]string{"outcome": "refused"})

		// The same bytes on a new connection: the node answers with its fresh nonce and proof
		// (65 bytes), then closes; no HTTP/2 frame ever comes back.
		replay, err := net.Dial("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		defer replay.Close()
		go func() { _, _ = replay.Write(rec.bytes()) }()
		_ = replay.SetReadDeadline(time.Now().Add(15 * time.Second))
		got, err := io.ReadAll(replay)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			Fail("replayed connection still open after 15 s")
		}
		Expect(len(got)).To(Equal(65), "the node sent %d bytes to a replayed handshake", len(got))
		Eventually(func() float64 {
			return metric(c.URL(0), "narad_cluster_auth_total", map[string]string{"outcome": "refused"})
		}).WithTimeout(10 * time.Second).Should(BeNumerically(">", refusedBefore))
	})
})

// recorder keeps every byte written through its recordingConns.
type recorder struct {
	mu  sync.Mutex
	out []byte
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.out...)
}

type recordingConn struct {
	net.Conn
	rec *recorder
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.out = append(c.rec.out, p...)
	c.rec.mu.Unlock()
	return c.Conn.Write(p)
}
