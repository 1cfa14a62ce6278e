// Package harness runs real narad processes for the black-box suites: each node gets its own
// loopback address (127.0.0.x) and data directory, and can be stopped gracefully, killed with
// SIGKILL, paused with SIGSTOP, and restarted on the same data.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"narad.dev/broker/client"
)

// Binary returns the narad binary under test: $NARAD_BIN, else ../bin/narad relative to the
// test module.
func Binary() (string, error) {
	if p := os.Getenv("NARAD_BIN"); p != "" {
		return p, nil
	}
	for _, p := range []string{"../bin/narad", "../../bin/narad", "../../../bin/narad"} {
		if abs, err := filepath.Abs(p); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs, nil
			}
		}
	}
	return "", errors.New("narad binary not found: run `make build` or set NARAD_BIN")
}

var hostSeq atomic.Uint32

// NextHost returns a fresh loopback address (127.0.0.2 … 127.0.0.254, then wrapping), so
// nodes of concurrent tests never share an address.
func NextHost() string {
	n := hostSeq.Add(1)
	return fmt.Sprintf("127.0.0.%d", 2+(n+uint32(os.Getpid()))%250)
}

// FreePorts returns n distinct TCP ports that were free on host a moment ago: every listener
// stays open until all n are chosen, so the kernel cannot hand out one port twice.
func FreePorts(host string, n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// FreePort returns a TCP port that was free on host a moment ago.
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options configure a node.
type Options struct {
	ID            string   // node id; default "n1"
	Dev           bool     // --dev (auth off)
	AdminPassword string   // NARAD_ADMIN_PASSWORD when auth is on
	Env           []string // extra environment, e.g. NARAD_FAULTS=...
	Args          []string // extra serve flags
	DataDir       string   // default: a fresh temp dir
}

// Node is one narad process.
type Node struct {
	Opts        Options
	Bin         string
	Host        string
	HTTPAddr    string
	ClusterAddr string
	DataDir     string
	LogPath     string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	exit error
}

// NewNode prepares (does not start) a node.
func NewNode(opts Options) (*Node, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if opts.ID == "" {
		opts.ID = "n1"
	}
	host := NextHost()
	ports, err := FreePorts(host, 2)
	if err != nil {
		return nil, err
	}
	hp, cp := ports[0], ports[1]
	dir := opts.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "narad-node-"); err != nil {
			return nil, err
		}
	}
	return &Node{
		Opts: opts, Bin: bin, Host: host,
		HTTPAddr:    net.JoinHostPort(host, fmt.Sprint(hp)),
		ClusterAddr: net.JoinHostPort(host, fmt.Sprint(cp)),
		DataDir:     dir,
		LogPath:     filepath.Join(dir, "narad.log"),
	}, nil
}

// URL is the node's API base URL.
func (n *Node) URL() string { return "http://" + n.HTTPAddr }

// Client returns an API client for the node (admin credentials when auth is on).
func (n *Node) Client() *client.Client {
	var opts []client.Option
	if !n.Opts.Dev {
		opts = append(opts, client.WithBasicAuth("admin", n.Opts.AdminPassword))
	}
	c, err := client.New(n.URL(), opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// Start launches the process with extra environment (on top of Options.Env).
func (n *Node) Start(extraEnv ...string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return errors.New("node already running")
	}
	args := []string{"serve", "--node-id", n.Opts.ID, "--data-dir", filepath.Join(n.DataDir, "data"),
		"--http-addr", n.HTTPAddr, "--cluster-addr", n.ClusterAddr, "--log-format", "json"}
	if n.Opts.Dev {
		args = append(args, "--dev")
	}
	args = append(args, n.Opts.Args...)
	cmd := exec.Command(n.Bin, args...)
	env := append(os.Environ(), n.Opts.Env...)
	env = append(env, extraEnv...)
	if n.Opts.AdminPassword != "" {
		env = append(env, "NARAD_ADMIN_PASSWORD="+n.Opts.AdminPassword)
	}
	cmd.Env = env
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	n.cmd, n.done, n.exit = cmd, done, nil
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exit = err
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

// WaitReady polls /readyz until 200 or the timeout; it fails early if the process exits.
func (n *Node) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		if done != nil {
			select {
			case <-done:
				return fmt.Errorf("narad exited before ready: %v\n%s", n.ExitErr(), n.Tail(40))
			default:
			}
		}
		resp, err := hc.Get(n.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node %s not ready after %s\n%s", n.Opts.ID, timeout, n.Tail(40))
}

// StartReady starts the node and waits until it is ready.
func (n *Node) StartReady(extraEnv ...string) error {
	if err := n.Start(extraEnv...); err != nil {
		return err
	}
	return n.WaitReady(30 * time.Second)
}

// Kill sends SIGKILL (a real kill -9) and waits for the process to die.
func (n *Node) Kill() { n.signalAndWait(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM and waits for a graceful exit.
func (n *Node) Stop() error {
	n.signalAndWait(syscall.SIGTERM, 30*time.Second)
	err := n.ExitErr()
	return err
}

// Pause (SIGSTOP) and Resume (SIGCONT) the process.
func (n *Node) Pause()  { n.signal(syscall.SIGSTOP) }
func (n *Node) Resume() { n.signal(syscall.SIGCONT) }

// Wait blocks until the process exits (e.g. after an injected crash) or the timeout.
func (n *Node) Wait(timeout time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		n.mu.Lock()
		n.cmd, n.done = nil, nil
		n.mu.Unlock()
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("node %s still running after %s", n.Opts.ID, timeout)
	}
}

// PID is the process id of the running process, 0 when it is not started.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func (n *Node) signal(sig syscall.Signal) {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

func (n *Node) signalAndWait(sig syscall.Signal, timeout time.Duration) {
	n.signal(syscall.SIGCONT)
	n.signal(sig)
	if err := n.Wait(timeout); err != nil {
		n.signal(syscall.SIGKILL)
		_ = n.Wait(timeout)
	}
}

// ExitErr is the process's exit status once it has exited.
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exit
}

// ExitSignal returns the signal that ended the last run (0 if it exited normally or is
// still running).
func (n *Node) ExitSignal() syscall.Signal {
	n.mu.Lock()
	defer n.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(n.exit, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// Tail returns the last lines of the node's log, for failure messages.
func (n *Node) Tail(lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Cleanup kills the node and removes its data directory.
func (n *Node) Cleanup() {
	n.Kill()
	_ = os.RemoveAll(n.DataDir)
}

// Ctx is a helper for bounded test steps.
func Ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
