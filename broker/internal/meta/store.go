package meta

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"narad.dev/broker/internal/durable"
)

// Metastore constants (docs/internals/metastore.md §2, §14).
const (
	DefaultApplyTimeout = 5 * time.Second // a proposal's enqueue + commit wait
	BarrierTimeout      = 5 * time.Second
	LeaderContactMax    = 5 * time.Second // AppliedCaughtUp freshness: last leader contact
	SnapshotsRetained   = 2
)

// Config configures Open.
type Config struct {
	// Dir is the metastore directory; it holds raft/ (log + stable store), fsm/ and
	// snapshots/. Created if missing.
	Dir string
	// NodeID is this node's Raft server ID (= member ID, the pod name).
	NodeID string
	// LocalAddr is this node's Raft server address (cluster_addr). With a nil Transport it
	// names the in-memory transport ("" → NodeID); otherwise the Transport's own address wins.
	LocalAddr string
	// Transport carries Raft RPCs. nil → an in-memory transport (single-node use and tests),
	// owned and closed by the Store. A non-nil Transport stays owned by the caller, who closes
	// it after Close.
	Transport raft.Transport
	// Bootstrap bootstraps BootstrapServers (default: this node as the single voter) when the
	// node has no Raft state at all. Consulted only on an empty disk; a node with state never
	// re-bootstraps.
	Bootstrap bool
	// BootstrapServers is the initial voter configuration. nil → {NodeID at the transport's
	// address}, the only form the broker uses (docs/internals/metastore.md §11: a cluster
	// always bootstraps as one voter and the others join); tests list several in-memory voters.
	BootstrapServers []raft.Server
	// Logger receives the metastore's logs; Raft's own logs are routed into it at warn and
	// above. nil → discard.
	Logger *slog.Logger
	// ApplyTimeout bounds a proposal (0 → DefaultApplyTimeout, 5 s).
	ApplyTimeout time.Duration
	// OnApply is called after each applied command that changed state, and after a snapshot
	// restore (Event.Op == OpRestore), on the FSM goroutine: it must not block and must not
	// call back into proposals or Barrier.
	OnApply func(Event)
	// RaftConfig optionally adjusts the Raft configuration (tests shorten timeouts). LocalID,
	// Logger and NoSnapshotRestoreOnStart are set by Open after it runs.
	RaftConfig func(*raft.Config)
	// LeaderReader performs leader-confirmed reads against the leader when this node is a
	// follower (node RPC). nil → a follower's confirmed reads fail as unconfirmed.
	LeaderReader LeaderReader
	// Forwarder carries a follower's proposals to the leader (node RPC). nil → a follower's
	// proposal fails wrapping ErrNoLeader (single-node use and tests).
	Forwarder Forwarder

	// wrapLogs, when set, wraps the Raft log store Raft writes through (tests hold appends).
	wrapLogs func(raft.LogStore) raft.LogStore
}

// Store is Narad's metastore: hashicorp/raft over a pebble log store, with the FSM durable
// in its own pebble DB. Proposals go through Raft and return sentinel errors; local reads hit
// this replica's FSM and may be stale (see AppliedCaughtUp and the Confirm* reads).
// All methods are safe for concurrent use.
type Store struct {
	cfg    Config
	logger *slog.Logger
	raft   *raft.Raft
	fsm    *fsm
	logs   *LogStore
	snaps  *raft.FileSnapshotStore
	trans  raft.Transport
	inmem  *raft.InmemTransport // owned in-memory transport, closed by Close

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{}
	watchDone chan struct{}

	leaderMu   sync.Mutex
	leaderSubs map[chan bool]struct{}
	leaders    signal // notified when the known leader changes (LeaderChange)

	floorMu sync.Mutex
	floor   termFloor // see leaderCommitted

	contactMax time.Duration // LeaderContactMax; shortened only by tests
}

// Open opens (or creates) the metastore in cfg.Dir and starts Raft. With Bootstrap on an empty
// disk the node elects itself (raft default timeouts: about 1–2 s); WaitCaughtUp waits for it.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" || cfg.NodeID == "" {
		return nil, fmt.Errorf("%w: metastore Dir and NodeID are required", ErrInvalid)
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = DefaultApplyTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = discardLogger()
	}
	logger = logger.With("node", cfg.NodeID)
	for _, sub := range []string{"raft", "fsm"} {
		if err := durable.MkdirAll(filepath.Join(cfg.Dir, sub)); err != nil {
			return nil, fmt.Errorf("meta: create %s: %w", sub, err)
		}
	}
	s := &Store{cfg: cfg, logger: logger, stop: make(chan struct{}), watchDone: make(chan struct{}),
		leaderSubs: map[chan bool]struct{}{}, contactMax: LeaderContactMax}
	if err := s.open(); err != nil {
		s.release()
		return nil, err
	}
	obs, deregister := s.leaderObservations()
	go s.watchLeadership(obs, deregister)
	return s, nil
}

func (s *Store) open() error {
	cfg := s.cfg
	var err error
	if s.logs, err = OpenLogStore(filepath.Join(cfg.Dir, "raft"), s.logger); err != nil {
		return err
	}
	if s.fsm, err = openFSM(filepath.Join(cfg.Dir, "fsm"), nil, s.logger, cfg.OnApply); err != nil {
		return err
	}
	s.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, SnapshotsRetained,
		newHCLogAdapter(s.logger, "raft-snapshots", hclog.Warn))
	if err != nil {
		return fmt.Errorf("meta: snapshot store: %w", err)
	}
	if err := s.restoreIfBehind(); err != nil {
		return err
	}
	s.trans = cfg.Transport
	if s.trans == nil {
		addr := cfg.LocalAddr
		if addr == "" {
			addr = cfg.NodeID
		}
		_, s.inmem = raft.NewInmemTransport(raft.ServerAddress(addr))
		s.trans = s.inmem
	}
	rc := raft.DefaultConfig()
	if cfg.RaftConfig != nil {
		cfg.RaftConfig(rc)
	}
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = newHCLogAdapter(s.logger, "raft", hclog.Warn)
	rc.NoSnapshotRestoreOnStart = true // the FSM is durable in pebble (§2.3)
	if cfg.Bootstrap {
		if err := s.bootstrap(rc); err != nil {
			return err
		}
	}
	var logs raft.LogStore = s.logs
	if cfg.wrapLogs != nil {
		logs = cfg.wrapLogs(logs)
	}
	if s.raft, err = raft.NewRaft(rc, s.fsm, logs, s.logs, s.snaps, s.trans); err != nil {
		return fmt.Errorf("meta: start raft: %w", err)
	}
	return nil
}

// restoreIfBehind is the start-up check of §2.3 rule 4b: an FSM whose m/applied is below the
// latest snapshot's index is restored from that snapshot before Raft starts.
func (s *Store) restoreIfBehind() error {
	list, err := s.snaps.List()
	if err != nil {
		return fmt.Errorf("meta: list snapshots: %w", err)
	}
	if len(list) == 0 || s.fsm.applied() >= list[0].Index {
		return nil
	}
	latest := list[0]
	s.logger.Warn("fsm is behind the latest raft snapshot; restoring from it",
		"applied", s.fsm.applied(), "snapshot", latest.ID, "snapshot_index", latest.Index)
	_, rc, err := s.snaps.Open(latest.ID)
	if err != nil {
		return fmt.Errorf("meta: open snapshot %s: %w", latest.ID, err)
	}
	defer rc.Close()
	if err := s.fsm.restore(rc, latest.Index); err != nil {
		return fmt.Errorf("meta: restore snapshot %s: %w", latest.ID, err)
	}
	return nil
}

func (s *Store) bootstrap(rc *raft.Config) error {
	has, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	if err != nil {
		return fmt.Errorf("meta: inspect raft state: %w", err)
	}
	if has {
		return nil
	}
	servers := s.cfg.BootstrapServers
	if len(servers) == 0 {
		servers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.NodeID), Address: s.trans.LocalAddr()}}
	}
	s.logger.Info("bootstrapping raft", "servers", len(servers))
	if err := raft.BootstrapCluster(rc, s.logs, s.logs, s.snaps, s.trans, raft.Configuration{Servers: servers}); err != nil {
		return fmt.Errorf("meta: bootstrap: %w", err)
	}
	return nil
}

// Close shuts Raft down and closes both DBs (and the in-memory transport it created). Local
// reads after Close return nothing; proposals return ErrClosed. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.stop)
		var errs []error
		if s.raft != nil {
			errs = append(errs, s.raft.Shutdown().Error())
		}
		<-s.watchDone
		s.closeErr = errors.Join(append(errs, s.release())...)
	})
	return s.closeErr
}

// release closes what open created (also on a failed Open).
func (s *Store) release() error {
	var errs []error
	if s.inmem != nil {
		errs = append(errs, s.inmem.Close())
	}
	if s.fsm != nil {
		errs = append(errs, s.fsm.close())
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	return errors.Join(errs...)
}

// Raft exposes the Raft node (LeadershipTransfer, stats). Membership changes go through the
// helpers of membership.go, which bound and map their errors. Do not Shutdown it directly;
// use Close.
func (s *Store) Raft() *raft.Raft { return s.raft }

// NodeID returns this node's Raft server ID.
func (s *Store) NodeID() string { return s.cfg.NodeID }
