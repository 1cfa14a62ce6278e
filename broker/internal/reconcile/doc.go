// Package reconcile holds the shape shared by this node's background runners (fan-out
// cursors, partition moves): a set of keyed worker goroutines compared, tick by tick, with the
// set of workers the metastore says should run here, starting the missing ones and stopping
// those no longer wanted.
//
// Three pieces, each usable alone:
//
//   - Pacer runs a tick function on a ticker and decides per tick whether a full pass is due
//     (the skip rule): a pass runs on the first tick, after a pass that did not finish its
//     work, when the caller forces one, when the observed version moved, and at least every
//     FullPassEvery; otherwise the tick is skipped.
//   - Workers is a keyed set of worker goroutines, each with its own cancellable context.
//     Invariant: at most one goroutine per key exists at a time; a replacement for a key
//     starts only after the worker it replaces has exited.
//   - Reconcile compares Workers with one pass's wanted set: it stops workers whose key is no
//     longer wanted (or wanted with different parameters), and starts wanted ones whose key is
//     free, while the replica is caught up.
//
// The package imports nothing from this module.
package reconcile
