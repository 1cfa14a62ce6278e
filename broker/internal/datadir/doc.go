// Package datadir is the layout of a node's data directory: it builds every path and name
// under --data-dir and parses every name a scanner meets there, so that the writers and the
// sweeps read one rule. It only builds and parses (plus the one-line .incarnation marker); it
// never lists or removes anything. docs/internals/data-directory.md explains the layout for a
// maintainer.
//
// The tree, with each name's rule, who writes it and who removes it:
//
//	<data>/
//	├── metastore/                   Raft log, snapshots, pebble state          meta
//	├── ingress/produce/             ingress write-ahead log                    wal (names inside: wal)
//	├── topics/
//	│   └── <topic>/                 any name but a temp (durable.IsTemp)        engine registry
//	│       ├── .incarnation         the incarnation id and "\n"                 engine registry
//	│       ├── pNNNNN/              partition N, five digits: p00000…p99999     engine registry, move install
//	│       │   └── …                segments, hwm, consumer and cursor files:
//	│       │                        named by log, consume, fanout/cursorfile,
//	│       │                        transfer (move.marker)
//	│       └── pNNNNN.quarantine[-<seq>]   a copy set aside for an operator     engine (sweep reclaim, install)
//	├── .moves/
//	│   ├── <topic>-<N>/             a move's staging copy, N in decimal         move worker
//	│   ├── <topic>-<N>.quarantine[-<seq>]  a staging copy set aside             move worker (dispose)
//	│   └── <topic>-<N>.unverifiable a blocked move's note (a file)              move worker
//	└── .stale/
//	    └── <topic>@<incarnation>/   a deleted incarnation's topic dir, set      engine registry (prepare)
//	                                 aside when the topic was recreated here
//
// <seq> is a decimal without sign or leading zero (the writers use the wall clock in Unix
// nanoseconds); N likewise. A name containing durable.TempSuffix is a temp of an atomic write
// and never an entry of this layout.
//
// Who removes what (one remover per kind of leftover, on one schedule):
//
//   - topics/<topic> of a deleted incarnation: the delete's apply (engine purge) on a node
//     that applies it; otherwise the engine's orphan sweep, at boot and every 5 minutes, once
//     the leader confirms the incarnation gone. A marker-less directory of an unknown topic is
//     removed only by the boot run of that sweep (or its first caught-up run when the boot run
//     was skipped) and counted in narad_orphan_topic_dirs meanwhile.
//   - .stale/<topic>@<incarnation>: the engine's orphan sweep, with the same confirmation.
//   - topics/<topic>/pNNNNN of a live topic this node neither owns nor is the move target of:
//     the stale-copy sweep (move/sweep, every 30th move-runner tick), which removes it when the
//     owner vouches for it and quarantines it otherwise. It leaves deleted topics' data to the
//     orphan sweep.
//   - .moves/<topic>-<N> and its .unverifiable note: the move worker of that partition (and
//     the move runner's first caught-up pass for notes of moves no longer aimed here).
//   - Quarantined copies (*.quarantine[-<seq>]): never removed on their own; an operator
//     reconciles them (a partition's goes with its topic's directory when that is removed as
//     above). The engine counts them with the .stale directories (narad_quarantined_copies,
//     narad_quarantined_bytes) and lists them at startup.
package datadir
