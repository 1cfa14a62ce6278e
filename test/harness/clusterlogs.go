package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tails returns the last lines of every node's log, each under a header.
func (c *Cluster) Tails(lines int) string {
	var b strings.Builder
	for i := range c.Size() {
		m := c.member(i)
		c.mu.Lock()
		paused, expectDown := m.paused, m.expectDown
		c.mu.Unlock()
		state := "killed by the harness"
		switch {
		case paused:
			state = "paused"
		case m.node.Running():
			state = "running"
		case !expectDown:
			state = fmt.Sprintf("EXITED ON ITS OWN: %v", m.node.ExitErr())
		}
		fmt.Fprintf(&b, "==== %s (http %s, cluster %s, %s) ====\n%s\n", m.node.Opts.ID, m.node.HTTPAddr, m.node.ClusterAddr, state, m.node.Tail(lines))
	}
	return b.String()
}

// SaveLogs copies every node's full log to dir/<id>.log.
func (c *Cluster) SaveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range c.Size() {
		n := c.Node(i)
		b, err := os.ReadFile(n.LogPath)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n.Opts.ID+".log"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
