package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/audit"
	"narad.dev/broker/internal/auth"
	"narad.dev/broker/internal/config"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/dispatch"
	"narad.dev/broker/internal/durable"
	"narad.dev/broker/internal/engine"
	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/hostlist"
	"narad.dev/broker/internal/httpfast"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/metrics"
	"narad.dev/broker/internal/move"
	"narad.dev/broker/internal/move/sweep"
	"narad.dev/broker/internal/noderpc"
	"narad.dev/broker/internal/rpc"
	"narad.dev/broker/internal/rpc/nodepb"
	"narad.dev/broker/internal/wal"
)

// process is one node's process: what open built, in the order it built it, and the cleanup
// stack that closes it. start boots the node and launches its loops; stop shuts it down in
// the order its comment gives (docs/operating.md, What survives what). open's steps run in
// a fixed order, each using what the ones before it built.
type process struct {
	cfg     config.Serve
	stderr  io.Writer
	started time.Time
	logger  *slog.Logger
	audit   *audit.Logger
	m       *metrics.Metrics
	cleanup cleanup

	secret         []byte
	trustedProxies []netip.Prefix
	rpcOpts        []rpc.Option

	mux        *rpc.Mux
	muxCtx     context.Context // the cluster port's accept loop runs until the port closes
	advertise  string          // the cluster port's advertised address
	transport  raft.Transport
	raftDialer *rpc.StreamLayer // the transport's dialer (StopDialWaits before the Raft shutdown)
	nodes      noderpc.Peers
	pool       *rpc.Pool // behind nodes: peerUp resets its reconnect backoff
	store      *meta.Store
	in         *engine.Ingress
	e          *engine.Engine
	eng        atomic.Pointer[engine.Engine] // e once built: the metastore's events reach it from then on
	ctrl       *controller.Controller
	fan        *fanout.Runner
	runner     *move.Runner
	mv         noderpc.MoveDeps
	grpcSrv    *rpc.Server
	authn      *auth.Authenticator // the client API's credential check, shared with profiling
	hln        net.Listener
	httpSrv    *http.Server

	// The closes stop runs ahead of their turn on the cleanup stack.
	closeHTTP, closeIngress, stopGRPC, closeMux *closer

	ingress *group // the dispatcher: stops before the engine closes the partition logs
	loops   *group // every other background loop

	// stopping is set when a controlled shutdown begins: the heartbeat loop then keeps the
	// member's stopping flag set (docs/internals/replication.md §9).
	stopping atomic.Bool
}

// open builds the node up to serving HTTP, node RPC and (when configured) profiling, short
// of booting it. On failure it has closed everything it opened, in reverse.
func open(cfg config.Serve, stderr io.Writer) (_ *process, err error) {
	p := &process{cfg: cfg, stderr: stderr, started: time.Now(), ingress: newGroup(), loops: newGroup()}
	p.logger = newLogger(cfg, stderr)
	for _, w := range cfg.Warnings {
		p.logger.Warn(w)
	}
	p.audit = audit.New(p.logger, cfg.NodeID)
	p.m = metrics.New()
	defer func() {
		if err != nil {
			_ = p.cleanup.unwind()
		}
	}()
	for _, step := range []func() error{
		p.checkConfig, p.openClusterPort, p.openStore, p.openIngress, p.newController, p.newEngine, p.newMoves,
		p.serveCluster, p.serveHTTP,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	p.m.BootDuration.Set(time.Since(p.started).Seconds())
	if cfg.PprofAddr != "" {
		go servePprof(cfg.PprofAddr, pprofHandler(p.authn, cfg.SecurityEnabled), p.logger)
	}
	return p, nil
}

// checkConfig creates the data directory and resolves the secrets and lists the later steps
// need.
func (p *process) checkConfig() error {
	cfg := p.cfg
	if err := durable.MkdirAll(cfg.DataDir); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	secret, err := clusterSecret(cfg)
	if err != nil {
		return err
	}
	p.secret = secret
	if p.trustedProxies, err = auth.ParseTrustedProxies(cfg.TrustedProxies); err != nil {
		return fmt.Errorf("config: trusted-proxies: %w", err)
	}
	p.rpcOpts = []rpc.Option{rpc.WithNodeID(cfg.NodeID), rpc.WithCallObserver(p.m.NodeRPCObserver(nodeRPCMethods()))}
	if cfg.TLSCertFile != "" {
		ct, err := rpc.LoadClusterTLS(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.ClusterTLSCAFile)
		if err != nil {
			return fmt.Errorf("cluster tls: %w", err)
		}
		p.rpcOpts = append(p.rpcOpts, rpc.WithTLS(ct))
	} else if len(cfg.Join) > 0 {
		p.logger.Warn("cluster port is plaintext: set tls-cert, tls-key and cluster-tls-ca for mutual TLS between nodes")
	}
	return nil
}

// openClusterPort listens on the cluster port, where node RPC and Raft share one listener,
// and opens the pool of connections to the other nodes.
func (p *process) openClusterPort() error {
	cfg, m := p.cfg, p.m
	cln, err := net.Listen("tcp", cfg.ClusterAddr)
	if err != nil {
		return fmt.Errorf("cluster-addr: %w", err)
	}
	p.advertise = advertiseAddr(cfg.AdvertiseAddr, cln.Addr())
	cln = limitConns(cln, "cluster", cfg.ClusterMaxConnections, cfg.ClusterMaxConnectionsPerIP, p.logger, m)
	p.mux = rpc.NewMux(cln, p.secret, p.logger, append(p.rpcOpts, rpc.WithAuthObserver(func(ok bool) {
		m.ClusterAuth.WithLabelValues(pick(ok, "accepted", "refused")).Inc()
	}))...)
	muxCtx, stopMux := context.WithCancel(context.Background())
	p.muxCtx = muxCtx
	p.closeMux = p.cleanup.push("cluster port", func() error {
		_ = p.mux.Close() // as ever, a close error of the listener is not the shutdown's
		stopMux()
		return nil
	})
	sl, err := rpc.NewStreamLayer(p.mux, p.advertise, p.rpcOpts...)
	if err != nil {
		return fmt.Errorf("advertise-addr: %w", err)
	}
	p.transport = rpc.NewRaftTransport(sl, p.logger)
	p.raftDialer = sl
	pool := rpc.NewPool(p.secret, p.rpcOpts...)
	p.cleanup.push("peer pool", func() error {
		_ = pool.Close()
		return nil
	})
	p.nodes = noderpc.NewPeers(pool)
	p.pool = pool
	return nil
}

// openStore opens the metastore. Its events reach the engine once the engine exists.
func (p *process) openStore() error {
	cfg := p.cfg
	store, err := meta.Open(meta.Config{
		LeaderReader: p.nodes,
		Forwarder:    p.nodes,
		Dir:          datadir.New(cfg.DataDir).Metastore(),
		NodeID:       cfg.NodeID,
		LocalAddr:    p.advertise,
		Transport:    p.transport,
		Bootstrap:    cfg.Bootstrap || len(cfg.Join) == 0,
		Logger:       p.logger,
		OnApply: func(ev meta.Event) {
			if e := p.eng.Load(); e != nil {
				e.OnMetaEvent(ev)
				if ev.Op == meta.OpMemberHeartbeat || ev.Op == meta.OpMemberJoin {
					go p.peerUp(e, ev.Member) // not on the FSM goroutine: it reads the replica
				}
			}
		},
	})
	if err != nil {
		return fmt.Errorf("metastore: %w", err)
	}
	p.store = store
	p.cleanup.push("metastore", store.Close)
	// Unwound before the metastore: Raft's shutdown waits for its calls in flight, and a dial
	// to a dead peer would otherwise wait out its whole timeout.
	p.cleanup.push("raft dial waits", func() error {
		p.raftDialer.StopDialWaits()
		return nil
	})
	p.m.Cluster.Bind(clusterMetrics{store: store, now: time.Now})
	return nil
}

// peerUp lets calls to member id reach it at once after its heartbeat or join applied: a
// connection that failed while the member was down (a restart) otherwise waits out its
// reconnect backoff, up to 2 s, failing every call meanwhile (a produce forwarded to the
// member, a leader's fetch, a probe) with the last dial error.
func (p *process) peerUp(e *engine.Engine, id string) {
	if id == p.cfg.NodeID || p.pool == nil {
		return
	}
	if addr, ok := e.MemberClusterAddr(id); ok {
		p.pool.ResetBackoff(addr)
	}
}

// openIngress opens the ingress WAL; its dispatcher is built when it first runs, after the
// engine.
func (p *process) openIngress() error {
	logger := p.logger
	in, err := engine.OpenIngress(datadir.New(p.cfg.DataDir).ProduceWAL(), wal.Options{Logger: logger}, logger,
		func(w *wal.WAL) *dispatch.Dispatcher {
			return dispatch.New(w, p.e.Topology(), p.e.Committer(p.nodes), dispatch.Options{Logger: logger, Observer: dispatchObserver{p.m}})
		})
	if err != nil {
		return fmt.Errorf("ingress wal: %w", err)
	}
	p.in = in
	p.closeIngress = p.cleanup.push("ingress wal", in.Close)
	return nil
}

// newController builds the leader-side controller. It comes before the engine: its placement
// lock is the engine's.
func (p *process) newController() error {
	cfg, logger := p.cfg, p.logger
	store := p.store
	p.ctrl = controller.New(controller.Config{
		Store:     store,
		NodeID:    cfg.NodeID,
		Prober:    noderpc.NewProber(p.nodes),
		SeedRoot:  func(ctx context.Context) error { return seedRoot(ctx, cfg, store, logger) },
		Logger:    logger,
		Audit:     p.audit,
		DeadAfter: cfg.HeartbeatTimeout,
		Metrics:   p.m,

		DeadTargetAbortAfter: cfg.DeadTargetAbortAfter,
		MaxInFlightMoves:     cfg.MaxMovesInFlight,
		MinVoters:            cfg.MinVoters,
		ReplicaFailoverAfter: cfg.ReplicaFailoverAfter,
		ReReplicateAfter:     cfg.ReReplicateAfter,
		BalanceReplicas:      true,
		// 10 s with the default 30 s heartbeat timeout; shorter timeouts (tests) tick faster.
		Tick: min(10*time.Second, cfg.HeartbeatTimeout/3),
	})
	return nil
}

// newEngine builds the engine and the fan-out runner, and lets the metastore's events reach
// the engine.
func (p *process) newEngine() error {
	cfg, logger := p.cfg, p.logger
	remoteAllowed, err := hostlist.Parse(cfg.RemoteAllowedHosts)
	if err != nil { // config validation parsed it already
		return fmt.Errorf("config: remote-allowed-hosts: %w", err)
	}
	linkKey, err := remoteLinkKey(cfg, logger)
	if err != nil {
		return err
	}
	e := engine.New(engine.Config{
		NodeID:                   cfg.NodeID,
		DataDir:                  cfg.DataDir,
		Codec:                    cfg.StorageCodec,
		CompressionLevel:         cfg.StorageCompressionLevel,
		DefaultPartitions:        cfg.TopicDefaultPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		DefaultMinInsyncReplicas: cfg.DefaultMinInsyncReplicas,
		MaxPartitions:            cfg.TopicMaxPartitions,
		DefaultRetentionMs:       cfg.TopicDefaultRetentionMs,
		IdleLogEviction:          cfg.IdleLogEviction,
		SecurityEnabled:          cfg.SecurityEnabled,
		Logger:                   logger,
		Metrics:                  p.m,
		RemoteAllowedHosts:       remoteAllowed,
		LinkKey:                  linkKey,
		Peers:                    p.nodes,
		PlacementLock:            p.ctrl.PlacementLock(),
		MaxInflightAnswerBytes:   cfg.MaxInflightAnswerBytes,
	}, p.store, p.in)
	p.e = e
	// The fan-out runner is built over the engine, so it is bound to it after New.
	fan, err := fanout.NewRunner(fanout.Config{Host: e.FanoutHost(), Observer: fanout.NewMetricsObserver(p.m), Logger: logger,
		MaxBatchRecords: cfg.FanoutMaxBatchRecords, MaxBatchBytes: cfg.FanoutMaxBatchBytes})
	if err != nil {
		return fmt.Errorf("fan-out: %w", err)
	}
	p.fan = fan
	e.BindFanout(fan)
	p.eng.Store(e)
	return nil
}

// newMoves builds the partition moves (docs/internals/moves.md): this node's destination runner, its
// stale-copy sweep, and the objects behind the source, report and decommission endpoints.
func (p *process) newMoves() error {
	cfg, store, e := p.cfg, p.store, p.e
	tsrc := noderpc.NewTransferSource(p.nodes)
	p.runner = move.NewRunner(move.RunnerConfig{
		NodeID: cfg.NodeID,
		Store:  store,
		Source: tsrc,
		Local:  e,
		Sweeper: sweep.New(sweep.Config{NodeID: cfg.NodeID, DataDir: cfg.DataDir, Store: store, Source: tsrc,
			Engine: e, Logger: p.logger}),
		Metrics:           p.m,
		Logger:            p.logger,
		ForcePromoteAfter: cfg.ForcePromoteAfter,
	})
	p.mv = noderpc.MoveDeps{Source: e, Reporter: p.runner, Decom: p.ctrl, Elector: p.ctrl}
	return nil
}

// serveCluster serves node RPC and Raft on the cluster port.
func (p *process) serveCluster() error {
	p.grpcSrv = rpc.NewServer(p.secret, noderpc.NewService(noderpc.Deps{Engine: p.e, Store: p.store, Log: p.logger, Moves: p.mv,
		Replicas: p.e.ReplicaHost()}), p.logger, p.rpcOpts...)
	p.stopGRPC = p.cleanup.push("node rpc", func() error {
		p.grpcSrv.Stop()
		return nil
	})
	go func() { _ = p.grpcSrv.Serve(p.mux) }()
	go func() { _ = p.mux.Run(p.muxCtx) }()
	return nil
}

// serveHTTP serves the client API (and, when configured, profiling). /healthz answers at
// once; /readyz stays 503 until the boot finishes.
func (p *process) serveHTTP() error {
	cfg, logger, m := p.cfg, p.logger, p.m
	p.authn = auth.NewAuthenticator(p.e, auth.AuthOptions{Logger: logger, TrustedProxies: p.trustedProxies})
	handler := api.NewHandler(api.Options{
		Backend:         p.e,
		Auth:            p.authn,
		SecurityEnabled: cfg.SecurityEnabled,
		MaxConsumeWait:  cfg.MaxConsumeWait,
		MaxPartitions:   cfg.TopicMaxPartitions,
		Observer:        newHTTPObserver(m),
		APIObserver:     apiObserver{m},
		Metrics:         promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}),
		Cluster:         &clusterService{store: p.store, peers: p.nodes, mv: p.mv},
		Logger:          logger,
		Audit:           p.audit,

		// Produce bodies held at once; over it produce answers 503 (docs/operating.md, Limits).
		MaxInflightRequestBytes: cfg.MaxInflightRequestBytes,
	})
	hln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http-addr: %w", err)
	}
	p.hln = limitConns(hln, "http", cfg.MaxConnections, cfg.MaxConnectionsPerIP, logger, m)
	p.httpSrv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(cfg.HTTPReadTimeout, httpReadHeaderTimeout),
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),

		MaxHeaderBytes: maxHTTPHeaderBytes, // 431 above, as JSON (jsonErrorsListener)
	}
	var fast *httpfast.Server
	if cfg.HTTPFastPath && cfg.TLSCertFile == "" {
		// Plain HTTP: the hot requests of the common shape take the fast path; it hands every
		// other connection to net/http (docs/internals/http-api.md §1.9).
		fast = &httpfast.Server{Handler: handler, Std: p.httpSrv, Route: api.FastRoute, Logger: logger,
			OnHandoff: m.HTTPHandoffs.Inc}
	}
	p.closeHTTP = p.cleanup.push("http", func() error {
		// Drained for the shutdown grace; what is still running after it is cut off.
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		if fast == nil {
			_ = p.httpSrv.Shutdown(sctx)
			return nil
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = fast.Shutdown(sctx) }()
		_ = p.httpSrv.Shutdown(sctx)
		<-done
		return nil
	})
	go func() {
		switch {
		case cfg.TLSCertFile != "":
			_ = p.httpSrv.ServeTLS(p.hln, cfg.TLSCertFile, cfg.TLSKeyFile)
		case fast != nil:
			go func() { _ = p.httpSrv.Serve(jsonErrorsListener{fast.Handoff()}) }()
			_ = fast.Serve(p.hln)
		default:
			_ = p.httpSrv.Serve(jsonErrorsListener{p.hln}) // net/http's own 431/400 answers as JSON
		}
	}()
	return nil
}

// start boots the node (join, catch up, seed, sweep, register: see boot) and, when that
// succeeds, launches its loops, opens topic creation and marks it ready.
func (p *process) start(ctx context.Context) error {
	cfg, logger, e := p.cfg, p.logger, p.e
	httpAddr := p.hln.Addr().String()
	if err := boot(ctx, cfg, p.store, e, p.nodes, logger, p.advertise, httpAddr); err != nil {
		return err
	}
	e.DispatcherStarted(p.in.Undispatched)
	p.loops.run(func(ctx context.Context) { _ = e.Run(ctx) })
	p.loops.run(func(ctx context.Context) {
		heartbeat(ctx, p.store, self(cfg, p.advertise, httpAddr), cfg.HeartbeatInterval, p.stopping.Load, logger)
	})
	p.loops.run(func(ctx context.Context) { _ = p.ctrl.Run(ctx) })
	p.loops.run(func(ctx context.Context) { _ = p.fan.Run(ctx) })
	p.loops.run(func(ctx context.Context) { _ = p.runner.Run(ctx) })
	p.loops.run(func(ctx context.Context) { noderpc.WatchPeers(ctx, p.store, e, p.nodes, cfg.NodeID, logger) })
	// The ingress (dispatcher) stops before the engine closes the partition logs.
	p.ingress.run(func(ctx context.Context) { _ = p.in.Run(ctx) })
	e.OpenCreateGate()
	e.SetReady(true)
	logger.Info("narad ready", "node", cfg.NodeID, "http", httpAddr, "cluster", p.advertise,
		"data_dir", cfg.DataDir, "security", cfg.SecurityEnabled, "boot_seconds", time.Since(p.started).Seconds())
	if cfg.Dev {
		fmt.Fprintf(p.stderr, devBanner, httpAddr, cfg.DataDir)
	}
	return nil
}

// stop shuts the node down gracefully, whether or not start succeeded: /healthz → 503,
// leadership of its replicated partitions handed to other in-sync replicas (handOffLeaders),
// Raft leadership handed to another voter, HTTP drained for the shutdown grace, the dispatcher
// stopped before the ingress WAL closes and before the engine closes the partition logs, the
// loops stopped, then node RPC, the cluster port and the metastore. It returns the errors of
// closing the ingress WAL and the metastore.
func (p *process) stop() error {
	p.logger.Info("shutting down", "node", p.cfg.NodeID)
	p.e.BeginShutdown() // /healthz → 503
	p.handOffLeaders()
	if p.store.IsLeader() {
		if n := len(p.store.Members()); n > 1 {
			_ = p.store.Raft().LeadershipTransfer().Error()
		}
	}
	_ = p.closeHTTP.close()
	p.ingress.stop() // the dispatcher has stopped: no commit can reopen a log after closeAll
	werr := p.closeIngress.close()
	p.loops.stop()
	_ = p.stopGRPC.close()
	_ = p.closeMux.close()
	return errors.Join(werr, p.cleanup.unwind()) // the metastore, then the peer pool
}

// handOffLeaders is controlled shutdown (docs/internals/replication.md §9): while HTTP and node
// RPC still serve, leadership of every replicated partition this node leads moves to another
// live in-sync replica, for at most controller.ShutdownHandOffTimeout. What it could not move
// fails over once the node is gone (§7).
func (p *process) handOffLeaders() {
	if p.ctrl == nil || p.store == nil || !p.ctrl.InReplicatedISR() {
		return // nothing to hand off: the member record and the heartbeats stay as before
	}
	p.stopping.Store(true)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), controller.ShutdownHandOffTimeout)
	defer cancel()
	left, err := p.ctrl.HandOffLeaders(ctx)
	switch {
	case err != nil || left > 0:
		p.logger.Warn("controlled shutdown: replicated partitions still led by this node", "left", left,
			"err", err, "seconds", time.Since(began).Seconds())
	default:
		p.logger.Info("controlled shutdown: this node leads no replicated partition", "seconds", time.Since(began).Seconds())
	}
}

// nodeRPCMethods lists the node RPC service's methods, unary and streamed.
func nodeRPCMethods() []string {
	var out []string
	for _, m := range nodepb.Node_ServiceDesc.Methods {
		out = append(out, m.MethodName)
	}
	for _, s := range nodepb.Node_ServiceDesc.Streams {
		out = append(out, s.StreamName)
	}
	return out
}
