package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"narad.dev/broker/client"
)

// ClusterOptions configure a Cluster. Zero values pick the defaults named per field.
type ClusterOptions struct {
	N                 int                              // nodes Start brings up; default 3
	Voters            int                              // Raft voters expected once all N are up; default min(N, 3)
	Secret            string                           // NARAD_CLUSTER_SECRET; default 16 random bytes in hex
	HeartbeatInterval time.Duration                    // --heartbeat-interval; default 1s; negative omits the flag
	HeartbeatTimeout  time.Duration                    // --heartbeat-timeout (dead after); default 5s; negative omits
	Args              []string                         // extra serve flags for every node
	Env               []string                         // extra environment for every node
	NodeArgs          map[int][]string                 // extra serve flags by node index (0-based)
	NodeEnv           map[int][]string                 // extra environment by node index
	ReadyTimeout      time.Duration                    // bound on one node's start to /readyz 200; default 60s
	Root              string                           // parent of the node directories; default a fresh temp dir
	Logf              func(format string, args ...any) // progress lines (e.g. GinkgoWriter.Printf); nil = silent

	// Args come after the harness's own flags and so override them: a test that turns security
	// or TLS on (--security-enabled=true, --tls-cert …) sets HTTPS, HTTPClient (trusting its CA)
	// and ClientOptions (credentials) to match.
	HTTPS         bool            // nodes serve HTTPS: URLs use https://
	HTTPClient    *http.Client    // used by API clients and readiness probes; nil = defaults
	ClientOptions []client.Option // extra options of every API client, e.g. client.WithBasicAuth
}

// Cluster is N real narad processes forming one cluster over loopback: node i has id
// "n<i+1>", its own 127.0.0.x host, ports and directory <Root>/n<i+1> (data in data/, log in
// narad.log). Node 0 bootstraps; every other node joins with the cluster addresses of the
// nodes before it. Every wait is bounded by the caller's context and polls a condition.
//
// Start flags follow one rule, so a restart is what an operator would do: node 0 starts with
// --bootstrap until its data is wiped (a no-op on a non-empty disk); every other start uses
// --join with the cluster addresses of all other nodes. Methods are safe for concurrent use,
// but one node must not be started, killed or restarted from two goroutines at once.
type Cluster struct {
	Opts ClusterOptions
	Root string

	mu      sync.Mutex
	members []*clusterNode
	ownRoot bool
}

type clusterNode struct {
	node       *Node
	client     *client.Client
	paused     bool
	wiped      bool
	started    bool
	expectDown bool // the harness killed it: not running is no surprise
}

// NewCluster prepares (does not start) the N nodes of a cluster.
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	if opts.N <= 0 {
		opts.N = 3
	}
	if opts.Voters <= 0 {
		opts.Voters = min(opts.N, 3)
	}
	if opts.Secret == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		opts.Secret = hex.EncodeToString(b)
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = time.Second
	}
	if opts.HeartbeatTimeout == 0 {
		opts.HeartbeatTimeout = 5 * time.Second
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	c := &Cluster{Opts: opts, Root: opts.Root}
	if c.Root == "" {
		dir, err := os.MkdirTemp("", "narad-cluster-")
		if err != nil {
			return nil, err
		}
		c.Root, c.ownRoot = dir, true
	}
	for range opts.N {
		if _, err := c.prepare(); err != nil {
			c.Cleanup()
			return nil, err
		}
	}
	return c, nil
}

// prepare adds one not-yet-started node and returns its index.
func (c *Cluster) prepare() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.members)
	id := fmt.Sprintf("n%d", i+1)
	dir := filepath.Join(c.Root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	n, err := NewNode(Options{ID: id, DataDir: dir})
	if err != nil {
		return 0, err
	}
	copts := append([]client.Option{client.WithTimeout(15 * time.Second), client.WithHTTPClient(c.Opts.HTTPClient)}, c.Opts.ClientOptions...)
	cl, err := client.New(c.url(n), copts...)
	if err != nil {
		return 0, err
	}
	c.members = append(c.members, &clusterNode{node: n, client: cl})
	return i, nil
}

// url is node n's API base URL.
func (c *Cluster) url(n *Node) string {
	if c.Opts.HTTPS {
		return "https://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr
}

// URL returns node i's API base URL.
func (c *Cluster) URL(i int) string { return c.url(c.Node(i)) }

// Size is the number of nodes (started or not).
func (c *Cluster) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

func (c *Cluster) member(i int) *clusterNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.members) {
		panic(fmt.Sprintf("cluster has no node %d", i))
	}
	return c.members[i]
}

// Node returns node i's process handle.
func (c *Cluster) Node(i int) *Node { return c.member(i).node }

// ID returns node i's id ("n<i+1>").
func (c *Cluster) ID(i int) string { return c.member(i).node.Opts.ID }

// Index returns the index of the node with the given id, or -1.
func (c *Cluster) Index(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if m.node.Opts.ID == id {
			return i
		}
	}
	return -1
}

// Client returns an API client for node i (security is off in the cluster; 15 s per request
// plus any long-poll wait).
func (c *Cluster) Client(i int) *client.Client { return c.member(i).client }

// Endpoint returns node i as a traffic endpoint.
func (c *Cluster) Endpoint(i int) Endpoint {
	m := c.member(i)
	return Endpoint{Node: m.node.Opts.ID, Client: m.client}
}

// Endpoints returns the endpoints of the given nodes (every node when none is given).
func (c *Cluster) Endpoints(idx ...int) []Endpoint {
	if len(idx) == 0 {
		for i := range c.Size() {
			idx = append(idx, i)
		}
	}
	out := make([]Endpoint, 0, len(idx))
	for _, i := range idx {
		out = append(out, c.Endpoint(i))
	}
	return out
}

// Live returns the indexes of nodes that run and are not paused.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	ms := append([]*clusterNode(nil), c.members...)
	paused := make([]bool, len(ms))
	for i, m := range ms {
		paused[i] = m.paused
	}
	c.mu.Unlock()
	var out []int
	for i, m := range ms {
		if !paused[i] && m.node.Running() {
			out = append(out, i)
		}
	}
	return out
}

// Others returns every node index except the given ones.
func (c *Cluster) Others(except ...int) []int {
	var out []int
	for i := range c.Size() {
		skip := false
		for _, e := range except {
			skip = skip || e == i
		}
		if !skip {
			out = append(out, i)
		}
	}
	return out
}

var (
	flagHelpMu sync.Mutex
	flagHelp   = map[string]string{} // binary path → `serve --help` output
)

// binarySupports reports whether the binary under test lists flag in `narad serve --help`, so
// the harness can run against a build that predates a flag (it is then left out).
func binarySupports(flag string) bool {
	bin, err := Binary()
	if err != nil {
		return false
	}
	flagHelpMu.Lock()
	defer flagHelpMu.Unlock()
	out, ok := flagHelp[bin]
	if !ok {
		out, _ = execOutput(bin, "serve", "--help")
		flagHelp[bin] = out
	}
	return strings.Contains(out, flag)
}

// argsFor builds node i's serve flags for its next start.
func (c *Cluster) argsFor(i int) []string {
	args := []string{"--security-enabled=false"}
	if c.Opts.HeartbeatInterval > 0 && binarySupports("--heartbeat-interval") {
		args = append(args, "--heartbeat-interval", c.Opts.HeartbeatInterval.String())
	}
	if c.Opts.HeartbeatTimeout > 0 && binarySupports("--heartbeat-timeout") {
		args = append(args, "--heartbeat-timeout", c.Opts.HeartbeatTimeout.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if i == 0 && !m.wiped {
		args = append(args, "--bootstrap")
	} else {
		var peers []string
		for j, o := range c.members {
			if j != i && (o.started || j < i) {
				peers = append(peers, o.node.ClusterAddr)
			}
		}
		args = append(args, "--join", strings.Join(peers, ","))
	}
	args = append(args, c.Opts.Args...)
	return append(args, c.Opts.NodeArgs[i]...)
}

// launch starts node i's process (not waiting for readiness).
func (c *Cluster) launch(i int) error {
	args := c.argsFor(i)
	m := c.member(i)
	env := append([]string{"NARAD_CLUSTER_SECRET=" + c.Opts.Secret}, c.Opts.Env...)
	env = append(env, c.Opts.NodeEnv[i]...)
	if !m.node.Running() {
		_ = m.node.Wait(time.Second) // reap a process that died on its own
	}
	m.node.Opts.Args = args
	m.node.Opts.Env = env
	c.Opts.Logf("cluster: starting %s on %s (cluster %s): %s", m.node.Opts.ID, m.node.HTTPAddr, m.node.ClusterAddr, strings.Join(args, " "))
	if err := m.node.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.node.Opts.ID, err)
	}
	c.mu.Lock()
	m.started, m.paused, m.expectDown = true, false, false
	c.mu.Unlock()
	return nil
}

// Start brings the cluster up: node 0 bootstraps; then each other node joins in turn, is
// ready (/readyz 200) and shows as alive in the members list before the next one starts;
// finally the members list shows every node alive and Opts.Voters voters.
func (c *Cluster) Start(ctx context.Context) error {
	began := time.Now()
	for i := range c.Size() {
		if err := c.startOne(ctx, i); err != nil {
			return err
		}
	}
	if err := c.WaitVoters(ctx, c.Opts.Voters); err != nil {
		return err
	}
	c.Opts.Logf("cluster: %d nodes up, %d voters, in %s", c.Size(), c.Opts.Voters, time.Since(began).Round(time.Millisecond))
	return nil
}

func (c *Cluster) startOne(ctx context.Context, i int) error {
	began := time.Now()
	if err := c.launch(i); err != nil {
		return err
	}
	if err := c.WaitReady(ctx, i); err != nil {
		return err
	}
	if err := c.WaitMember(ctx, c.ID(i), client.StatusAlive); err != nil {
		return err
	}
	c.Opts.Logf("cluster: %s ready and alive after %s", c.ID(i), time.Since(began).Round(time.Millisecond))
	return nil
}

// WaitReady polls node i's /readyz until 200, failing early if the process exits.
func (c *Cluster) WaitReady(ctx context.Context, i int) error {
	n := c.Node(i)
	ctx, cancel := context.WithTimeout(ctx, c.Opts.ReadyTimeout)
	defer cancel()
	hc := c.Opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	last := "no answer"
	err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if !n.Running() {
			return false, fmt.Errorf("%s exited before ready: %v", n.Opts.ID, n.ExitErr())
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.url(n)+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready (last /readyz: %s): %w\n%s", n.Opts.ID, last, err, n.Tail(30))
	}
	return nil
}

// Kill sends SIGKILL to node i (a real kill -9) and waits for the process to die.
func (c *Cluster) Kill(i int) {
	m := c.member(i)
	c.Opts.Logf("cluster: kill -9 %s", m.node.Opts.ID)
	c.mu.Lock()
	m.expectDown = true
	c.mu.Unlock()
	m.node.Kill()
	c.mu.Lock()
	m.paused = false
	c.mu.Unlock()
}

// Stop sends SIGTERM to node i (a graceful, controlled shutdown) and waits for it to exit;
// it returns the process's exit status.
func (c *Cluster) Stop(i int) error {
	m := c.member(i)
	c.Opts.Logf("cluster: SIGTERM %s", m.node.Opts.ID)
	c.mu.Lock()
	m.expectDown = true
	c.mu.Unlock()
	return m.node.Stop()
}

// Unexpected lists the nodes that were started and are no longer running although the harness
// did not kill them (a crash, a fatal error, a signal from elsewhere), with their exit status.
func (c *Cluster) Unexpected() []string {
	var out []string
	for i := range c.Size() {
		m := c.member(i)
		c.mu.Lock()
		suspect := m.started && !m.expectDown
		c.mu.Unlock()
		if suspect && !m.node.Running() {
			out = append(out, fmt.Sprintf("%s exited on its own (%v)", m.node.Opts.ID, m.node.ExitErr()))
		}
	}
	return out
}

// Pause freezes node i with SIGSTOP: to every peer it looks partitioned away.
func (c *Cluster) Pause(i int) {
	m := c.member(i)
	c.Opts.Logf("cluster: SIGSTOP %s", m.node.Opts.ID)
	m.node.Pause()
	c.mu.Lock()
	m.paused = true
	c.mu.Unlock()
}

// Resume thaws node i with SIGCONT.
func (c *Cluster) Resume(i int) {
	m := c.member(i)
	c.Opts.Logf("cluster: SIGCONT %s", m.node.Opts.ID)
	m.node.Resume()
	c.mu.Lock()
	m.paused = false
	c.mu.Unlock()
}

// Restart starts node i again with the same id, addresses and data, killing it with SIGKILL
// first if it still runs, and waits until it is ready. (A wiped node rejoins as a new one.)
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if c.Node(i).Running() {
		c.Kill(i)
	}
	began := time.Now()
	if err := c.launch(i); err != nil {
		return err
	}
	if err := c.WaitReady(ctx, i); err != nil {
		return err
	}
	c.Opts.Logf("cluster: %s restarted, ready after %s", c.ID(i), time.Since(began).Round(time.Millisecond))
	return nil
}

// Wipe kills node i and deletes its data directory (its log survives); its next start joins
// the cluster as an empty node with the same id.
func (c *Cluster) Wipe(i int) error {
	c.Kill(i)
	m := c.member(i)
	c.mu.Lock()
	m.wiped = true
	c.mu.Unlock()
	c.Opts.Logf("cluster: wiping %s", m.node.Opts.ID)
	return os.RemoveAll(filepath.Join(m.node.DataDir, "data"))
}

// AddNode prepares and starts one more node that joins through every existing node, waits
// until it is ready and alive, and returns its index.
func (c *Cluster) AddNode(ctx context.Context) (int, error) {
	i, err := c.prepare()
	if err != nil {
		return 0, err
	}
	return i, c.startOne(ctx, i)
}

// Cleanup kills every node (thawing paused ones first) and removes the cluster's directory
// when NewCluster created it.
func (c *Cluster) Cleanup() {
	for i := range c.Size() {
		c.member(i).node.Kill()
	}
	if c.ownRoot {
		_ = os.RemoveAll(c.Root)
	}
}

// execOutput runs a short command and returns its combined output (bounded to 10 s).
func execOutput(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
