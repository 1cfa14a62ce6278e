package rpc

import (
	"google.golang.org/grpc"

	"narad.dev/broker/internal/rpc/nodepb"
)

// Message classes (docs/internals/node-rpc.md §1.1). gRPC has one receive limit per
// server, checked against each message's length prefix before the message is read; so the
// node RPC runs two servers behind the cluster port, each with the limit its methods need,
// and a peer opens one connection per class (kind byte GRPCTag or GRPCBulkTag). A method is
// registered only on its own class's server: called on the other one it is refused as
// unimplemented before a byte of its request is read.
//
//   - control (GRPCTag): requests are a few names and numbers, or at most maxAckBatch ack
//     handles (about 30 KB); MaxControlMessageBytes, 256 KiB.
//   - bulk (GRPCBulkTag): requests that carry records (a forwarded produce batch or a
//     fan-out slab) or a client's JSON body re-encoded (topic writes with a schema,
//     forwarded metastore commands); MaxMessageBytes plus messageSlack.
//
// Replies are not classed: the client accepts up to maxGRPCMessage on both connections
// (a consume reply or a segment chunk is larger than any control request).

// GRPCBulkTag is the first byte of a bulk-class gRPC connection on the cluster port.
const GRPCBulkTag byte = 0x03

// MaxControlMessageBytes is the largest control-class request a node reads.
const MaxControlMessageBytes = 256 << 10

// Flow-control windows of every node RPC connection, both ends, fixed. gRPC's default
// estimates the bandwidth-delay product instead, with a PING sent (and answered by the peer)
// for nearly every DATA frame a connection receives while the estimate is below its 16 MiB
// cap: node RPC's small request-and-reply calls (a follower's fetch, a forwarded produce)
// never reach the cap, so each call cost two more writes and reads on each side (counted in
// docs/benchmarks.md, "Node RPC without flow-control pings"). Both windows are that cap, what
// the estimate reaches on a connection that carries bulk data: a peer's connection buffers no
// more than before, and a follower's 8 MiB catch-up answer flows without waiting for window
// updates (the two catch-ups measured with 4 MiB per stream came out slower).
const (
	streamWindow = 16 << 20
	connWindow   = 16 << 20
)

// bulkMethods are the methods of the bulk class; every other method is control.
var bulkMethods = map[string]bool{
	nodepb.Node_CommitProduceBatch_FullMethodName: true,
	nodepb.Node_ForwardCommand_FullMethodName:     true,
	nodepb.Node_CreateTopic_FullMethodName:        true,
	nodepb.Node_AlterTopic_FullMethodName:         true,
	nodepb.Node_DeleteTopic_FullMethodName:        true,
	nodepb.Node_AttachChild_FullMethodName:        true,
	nodepb.Node_DetachChild_FullMethodName:        true,
}

// messageClass is one class's kind byte and request limit.
type messageClass struct {
	tag     byte
	maxRecv int
}

var (
	controlClass = messageClass{tag: GRPCTag, maxRecv: MaxControlMessageBytes}
	bulkClass    = messageClass{tag: GRPCBulkTag, maxRecv: maxGRPCMessage}
)

// classOf returns the class of a full method name ("/narad.node.v1.Node/Consume").
func classOf(fullMethod string) messageClass {
	if bulkMethods[fullMethod] {
		return bulkClass
	}
	return controlClass
}

// serviceFor returns desc with only the methods and streams of class c.
func serviceFor(desc *grpc.ServiceDesc, c messageClass) *grpc.ServiceDesc {
	out := *desc
	out.Methods = nil
	out.Streams = nil
	prefix := "/" + desc.ServiceName + "/"
	for _, m := range desc.Methods {
		if classOf(prefix+m.MethodName) == c {
			out.Methods = append(out.Methods, m)
		}
	}
	for _, s := range desc.Streams {
		if classOf(prefix+s.StreamName) == c {
			out.Streams = append(out.Streams, s)
		}
	}
	return &out
}
