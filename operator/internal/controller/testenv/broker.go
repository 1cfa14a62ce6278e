package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"narad.dev/broker/client"
)

// BuildNarad builds the broker binary from the workspace's broker module into dir.
func BuildNarad(dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "narad")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/narad")
	cmd.Dir = filepath.Join(root, "broker")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/narad: %w\n%s", err, out)
	}
	return bin, nil
}

// Broker is one `narad serve` process: a single-node cluster with security on, bootstrapped
// on an empty data directory, listening on a loopback host only.
type Broker struct {
	NodeID   string
	Password string // the root admin's ("admin")
	URL      string // http://host:port of the client API
	dir      string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
}

// StartBroker starts a broker as node nodeID on host (127.0.0.x) with free ports and waits
// until /readyz answers 200 (admin calls before that may trip the failed-login throttle).
func StartBroker(bin, host, nodeID, password string) (*Broker, error) {
	ports, err := freePorts(host, 2)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "narad-operator-broker-")
	if err != nil {
		return nil, err
	}
	httpAddr := net.JoinHostPort(host, strconv.Itoa(ports[0]))
	b := &Broker{NodeID: nodeID, Password: password, URL: "http://" + httpAddr, dir: dir,
		logPath: filepath.Join(dir, "narad.log"), done: make(chan struct{})}
	logf, err := os.Create(b.logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	b.cmd = exec.Command(bin, "serve", "--node-id", nodeID, "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", httpAddr, "--cluster-addr", net.JoinHostPort(host, strconv.Itoa(ports[1])),
		"--bootstrap", "--initial-members", nodeID, "--security-enabled=true", "--log-format", "json")
	b.cmd.Env = append(os.Environ(), "NARAD_ADMIN_PASSWORD="+password, "NARAD_CLUSTER_SECRET=operator-suite-secret")
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		_ = b.cmd.Wait()
		logf.Close()
		close(b.done)
	}()
	if err := b.waitReady(60 * time.Second); err != nil {
		b.Stop()
		return nil, err
	}
	return b, nil
}

// Client is an admin client of the broker.
func (b *Broker) Client() *client.Client {
	c, err := client.New(b.URL, client.WithBasicAuth("admin", b.Password), client.WithTimeout(15*time.Second))
	if err != nil {
		panic(err) // the URL is built here; it always parses
	}
	return c
}

// Stop ends the process (SIGTERM, SIGKILL after 20 s) and removes its data directory.
func (b *Broker) Stop() {
	if b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(20 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	_ = os.RemoveAll(b.dir)
}

// Tail returns the last lines of the broker's log, for failure messages.
func (b *Broker) Tail(lines int) string {
	raw, err := os.ReadFile(b.logPath)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func (b *Broker) waitReady(timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		resp, err := hc.Get(b.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-b.done:
			return fmt.Errorf("narad exited before ready:\n%s", b.Tail(30))
		case <-deadline:
			return fmt.Errorf("narad not ready after %s:\n%s", timeout, b.Tail(30))
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct ports that were free on host a moment ago (all listeners stay
// open until every port is chosen).
func freePorts(host string, n int) ([]int, error) {
	var out []int
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("listen on %s", host), err)
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
