package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"narad.dev/broker/client"
)

// ErrNoLeader is returned by Leader when no live node claims Raft leadership in time.
var ErrNoLeader = errors.New("no live node leads raft")

// Members returns one members list: the leader's own when a live node says it leads, else the
// first answer of any live node. The answering node's id is returned too.
func (c *Cluster) Members(ctx context.Context) (*client.MemberList, string, error) {
	var first *client.MemberList
	firstFrom := ""
	var lastErr error
	for _, i := range c.Live() {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		l, err := c.Client(i).ClusterMembers(rctx)
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("%s: %w", c.ID(i), err)
			continue
		}
		if l.Leader == c.ID(i) {
			return l, c.ID(i), nil
		}
		if first == nil {
			first, firstFrom = l, c.ID(i)
		}
	}
	if first != nil {
		return first, firstFrom, nil
	}
	if lastErr == nil {
		lastErr = errors.New("no live node")
	}
	return nil, "", lastErr
}

// LeaderIndex waits until a live node reports itself as the Raft leader in its members list
// and returns its index. (Followers' word is not taken: they may still name a dead leader.)
func (c *Cluster) LeaderIndex(ctx context.Context) (int, error) {
	leader := -1
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		for _, i := range c.Live() {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			l, err := c.Client(i).ClusterMembers(rctx)
			cancel()
			if err == nil && l.Leader == c.ID(i) {
				leader = i
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return -1, fmt.Errorf("%w: %v (live: %v; unexpected exits: %v)", ErrNoLeader, err, c.Live(), c.Unexpected())
	}
	return leader, nil
}

// Leader is LeaderIndex returning the process handle.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	i, err := c.LeaderIndex(ctx)
	if err != nil {
		return nil, err
	}
	return c.Node(i), nil
}

// WaitMember waits until the members list (the leader's view when one is live) shows id with
// the given status (client.StatusAlive, StatusDead, StatusDraining).
func (c *Cluster) WaitMember(ctx context.Context, id, status string) error {
	return c.WaitMembers(ctx, fmt.Sprintf("%s %s", id, status), func(l *client.MemberList) bool {
		for _, m := range l.Members {
			if m.ID == id {
				return m.Status == status
			}
		}
		return false
	})
}

// WaitVoters waits until exactly n alive members are Raft voters.
func (c *Cluster) WaitVoters(ctx context.Context, n int) error {
	return c.WaitMembers(ctx, fmt.Sprintf("%d alive voters", n), func(l *client.MemberList) bool {
		return AliveVoters(l) == n
	})
}

// WaitMembers polls Members until cond holds; what names the condition in the error, which
// also shows the last list seen.
func (c *Cluster) WaitMembers(ctx context.Context, what string, cond func(*client.MemberList) bool) error {
	var last *client.MemberList
	from := ""
	var lastErr error
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		l, f, err := c.Members(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last, from = l, f
		return cond(l), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last members list from %s: %s; last error: %v; unexpected exits: %v)",
			what, err, from, FormatMembers(last), lastErr, c.Unexpected())
	}
	return nil
}

// AliveVoters counts the alive members that are Raft voters.
func AliveVoters(l *client.MemberList) int {
	n := 0
	for _, m := range l.Members {
		if m.RaftRole == "voter" && m.Status == client.StatusAlive {
			n++
		}
	}
	return n
}

// FormatMembers renders a members list on one line: "leader=n1 reachable=true n1:alive/voter/3p …".
func FormatMembers(l *client.MemberList) string {
	if l == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leader=%s reachable=%v", l.Leader, l.LeaderReachable)
	for _, m := range l.Members {
		fmt.Fprintf(&b, " %s:%s/%s/%dp", m.ID, m.Status, m.RaftRole, m.OwnedPartitions)
		if m.Leader {
			b.WriteString("*")
		}
	}
	return b.String()
}

// poll calls check every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, check func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
