// Package transfer holds what both sides of a partition move share (docs/internals/moves.md §4, §5;
// docs/internals/storage-format.md §16): the transfer listing a source reports, the freeze request a
// destination sends, the sentinel errors both map to and from node-RPC statuses, the move
// marker file and the destination's report of a move.
//
// It is a leaf package: the engine (source side), the move runner (destination side) and the
// server (RPC) import it, and it imports none of them.
package transfer
