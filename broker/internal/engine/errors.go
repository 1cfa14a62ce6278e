package engine

import "errors"

// Sentinel errors of the owner-side commit; the node RPC maps them to 421 / 404 / 503.
var (
	// ErrNotOwner: this node does not own the partition (421 on the node-to-node plane).
	ErrNotOwner = errors.New("not the partition owner")
	// ErrTopicGone: the topic (or this incarnation of it) does not exist in the local replica.
	ErrTopicGone = errors.New("topic or incarnation gone")
)
