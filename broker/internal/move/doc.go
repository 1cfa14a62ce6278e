// Package move is the destination side of a partition move (docs/internals/moves.md §2, §5–§8): the
// move runner, which every second looks for partitions targeted at this node and keeps one
// worker per such move, and the worker, which copies the partition from its owner, freezes
// the owner for the last tail, verifies and installs the copy and flips ownership with the
// metastore's compare-and-swap.
//
// The controller only writes where a partition should go; the destination does the move.
// The flip is the single guarded entry that makes the scheme free of split-brain, so a stale
// worker can only fail. Everything the worker does before the flip happens in a staging
// directory (.moves/<topic>-<N>) that nobody else opens; the install renames it into the
// partition path, and an install whose flip did not commit is renamed back only once the
// leader confirms it never will (§7).
//
// Files: config.go (the Store contract and the constants), runner.go (the reconcile
// loop, on package reconcile's pacer and keyed worker set), worker.go (one move's life and
// report), session.go (the staged copy and CatchUp), staged.go (a staged segment's writes:
// direct I/O for aligned chunks), freeze.go (arm, re-arm, drain, fence), finish.go
// (positions, verify, ages, durability, marker), flip.go (install, flip and unknown
// outcomes), promote.go (source failure and force-promote), dispose.go (ending without a
// flip).
//
// The other side of the same protocol, what the owner answers (the handoff freeze, the
// transfer listing, segment chunk reads), is package move/source; the stale-copy sweep is
// package move/sweep. Neither this package nor move/source imports the engine.
package move
