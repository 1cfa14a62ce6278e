package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/config"
	"narad.dev/broker/internal/connlimit"
	"narad.dev/broker/internal/credseal"
	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/noderpc"
)

// Boot and liveness constants (docs/internals/metastore.md §14).
const (
	caughtUpWait      = 60 * time.Second // startup wait for AppliedCaughtUp
	heartbeatInterval = 5 * time.Second
)

// Run starts a node with cfg and blocks until ctx ends, then shuts it down gracefully:
// /healthz → 503, HTTP drained for the shutdown grace, in-flight commits finished, logs closed
// with a CLEAN high watermark, WAL and metastore closed. The steps are process's: open builds
// everything (unwinding it on failure), start boots the node and launches its loops, stop
// shuts it down in order, also after a failed boot.
func Run(ctx context.Context, cfg config.Serve, stderr io.Writer) error {
	p, err := open(cfg, stderr)
	if err != nil {
		return err
	}
	bootErr := p.start(ctx)
	if bootErr == nil {
		<-ctx.Done()
	}
	err = p.stop()
	if bootErr != nil && !errors.Is(bootErr, context.Canceled) {
		return bootErr
	}
	return err
}

// boot runs the boot-order steps between the listeners and readiness (docs/internals/metastore.md §1):
// wait until the replica is caught up, seed the root admin once, and register this member.
func boot(ctx context.Context, cfg config.Serve, store *meta.Store, e *engine.Engine, nodes noderpc.Peers, logger *slog.Logger, clusterAddr, httpAddr string) error {
	if len(cfg.Join) > 0 {
		// Boot step 5: a node that is not (yet) part of a cluster asks to be admitted.
		if err := joinCluster(ctx, cfg, store, nodes, clusterAddr, logger); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, caughtUpWait)
	err := store.WaitCaughtUp(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.Warn("metastore not caught up at boot; continuing, destructive steps deferred", "err", err)
	}
	if store.IsLeader() && !store.RootSeeded() {
		if err := seedRoot(ctx, cfg, store, logger); err != nil {
			return fmt.Errorf("seed root admin: %w", err)
		}
	}
	if err == nil {
		// Boot step 6: the startup orphan sweep runs only on a replica that caught up in time.
		res := e.SweepOrphans(ctx)
		switch {
		case res.Deferred:
			// Caught up a moment ago, not now (an apply in flight): the first caught-up run of
			// the periodic sweep removes what this one would have.
			logger.Info("startup sweep deferred to the periodic sweep: metastore replica not caught up")
		case res.Quarantined > 0:
			// Data set aside for an operator is listed loudly at every start (docs/internals/storage-format.md §17).
			logger.Error("quarantined copies await an operator (see the quarantined copy lines)", "quarantined", res.Quarantined,
				"bytes", res.QuarBytes, "removed", res.Removed, "orphans", res.Orphans)
		case res.Removed+res.Orphans > 0:
			logger.Info("startup sweep", "removed", res.Removed, "orphans", res.Orphans)
		}
	}
	// Register this member. Without a quorum (or while an election runs) this fails; the
	// node still serves what it can and the heartbeat loop registers it once a leader exists.
	rctx, cancel := context.WithTimeout(ctx, registerWait)
	defer cancel()
	for {
		err := register(rctx, store, self(cfg, clusterAddr, httpAddr))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rctx.Err() != nil {
			logger.Warn("could not register this member yet (no quorum?); the heartbeat loop keeps trying", "err", err)
			return nil
		}
		select {
		case <-rctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// registerWait bounds boot's attempts to register this member.
const registerWait = 10 * time.Second

// self is this node's member record as it registers it.
func self(cfg config.Serve, clusterAddr, httpAddr string) meta.Member {
	return meta.Member{ID: cfg.NodeID, Addr: httpAdvertise(cfg.AdvertiseAddr, httpAddr), ClusterAddr: clusterAddr,
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix(), Rack: cfg.Rack}
}

// register upserts m (op 6) unless the replica already shows it with the same addresses and
// rack, in which case a heartbeat (op 7) is enough.
func register(ctx context.Context, store *meta.Store, m meta.Member) error {
	if cur, ok := store.Member(m.ID); ok && cur.Addr == m.Addr && cur.ClusterAddr == m.ClusterAddr && cur.Rack == m.Rack {
		return store.MemberHeartbeat(ctx, m.ID, m.LastHeartbeat)
	}
	return store.MemberJoin(ctx, m)
}

// seedRoot creates the root admin once per cluster, with the configured password or a random
// one that is logged exactly once.
func seedRoot(ctx context.Context, cfg config.Serve, store *meta.Store, logger *slog.Logger) error {
	pw := cfg.AdminPassword
	generated := false
	if pw == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		pw, generated = hex.EncodeToString(b[:]), true
	}
	hash, err := auth.HashPassword(pw, auth.DefaultBcryptCost)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	seeded, err := store.SeedRootUser(ctx, meta.User{Username: cfg.AdminUser, PasswordHash: hash, Root: true,
		Grants: []meta.Grant{{Action: meta.ActionAdmin}}, CreatedAtMs: now, UpdatedAtMs: now})
	if err != nil {
		return err
	}
	if seeded && generated && cfg.SecurityEnabled {
		logger.Warn("root admin seeded with a generated password; set NARAD_ADMIN_PASSWORD to choose one",
			"user", cfg.AdminUser, "password", pw)
	}
	return nil
}

// heartbeat upserts this member's record every interval (5 s by default, docs/internals/metastore.md §11); a follower's heartbeat is forwarded to the leader.
// Once stopping reports true (a controlled shutdown, docs/internals/replication.md §9) each
// heartbeat keeps the member's stopping flag set.
func heartbeat(ctx context.Context, store *meta.Store, me meta.Member, interval time.Duration, stopping func() bool, logger *slog.Logger) {
	if interval <= 0 {
		interval = heartbeatInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, interval)
		me.LastHeartbeat = time.Now().Unix()
		beat := register
		if stopping() {
			beat = func(ctx context.Context, store *meta.Store, m meta.Member) error {
				return store.MemberStopping(ctx, m.ID, m.LastHeartbeat)
			}
		}
		if err := beat(hctx, store, me); err != nil && ctx.Err() == nil {
			logger.Warn("heartbeat", "node", me.ID, "err", err)
		}
		cancel()
	}
}

// remoteLinkKey derives the key that seals remote-link passwords from the configured cluster
// secret. A node without one (a lone dev node; its node-RPC secret is random per start, so no
// key from it would open after a restart) gets none: remote links with a password are refused
// there (docs/fanout.md, Remote children).
func remoteLinkKey(cfg config.Serve, logger *slog.Logger) (*credseal.Key, error) {
	if cfg.ClusterSecret == "" {
		logger.Warn("no cluster secret configured: remote fan-out children with a password cannot be attached on this node (set NARAD_CLUSTER_SECRET or --cluster-secret-file)")
		return nil, nil
	}
	k, err := credseal.DeriveKey([]byte(cfg.ClusterSecret))
	if err != nil {
		return nil, fmt.Errorf("remote link key: %w", err)
	}
	return k, nil
}

func clusterSecret(cfg config.Serve) ([]byte, error) {
	if cfg.ClusterSecret != "" {
		return []byte(cfg.ClusterSecret), nil
	}
	if len(cfg.Join) > 0 {
		return nil, errors.New("config: cluster-secret: required to join a cluster (set NARAD_CLUSTER_SECRET or --cluster-secret-file)")
	}
	// A lone node with no secret: a random one, so nobody can call its node RPC at all.
	var b [32]byte
	_, _ = rand.Read(b[:])
	return b[:], nil
}

// advertiseAddr is the address peers use for this node's cluster port.
func advertiseAddr(configured string, bound net.Addr) string {
	if configured != "" {
		return configured
	}
	return advertiseAddrString("", bound.String())
}

// httpAdvertise is the HTTP address peers and clients are told for this node: the advertised
// cluster host (when --advertise-addr is set) with the HTTP listener's port, else the bound
// HTTP address with an unspecified host replaced by the host name.
func httpAdvertise(clusterAdvertise, httpBound string) string {
	if clusterAdvertise != "" {
		host, _, herr := net.SplitHostPort(clusterAdvertise)
		_, port, perr := net.SplitHostPort(httpBound)
		if herr == nil && perr == nil {
			return net.JoinHostPort(host, port)
		}
	}
	return advertiseAddrString("", httpBound)
}

func advertiseAddrString(configured, bound string) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

func newLogger(cfg config.Serve, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

const devBanner = `
  Narad is running (dev mode: one node, authentication off).
    API:   http://%s
    Data:  %s
  Try:
    narad topic add orders
    narad pub orders '{"id": 1}'
    narad sub orders
`

// httpReadHeaderTimeout bounds how long a client may take to send a request's headers
// (http-read-timeout when shorter), so a slow sender cannot hold a connection slot.
const httpReadHeaderTimeout = 5 * time.Second

// limitConns caps ln's open connections (docs/operating.md, "Connection limits"); refusals
// are counted by port and reason.
func limitConns(ln net.Listener, port string, total, perIP int, logger *slog.Logger, m *metrics.Metrics) net.Listener {
	return connlimit.New(ln, connlimit.Limits{Total: total, PerIP: perIP}, port, logger, func(reason string) {
		m.ConnectionsRefused.WithLabelValues(port, reason).Inc()
	})
}

func pick(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}
