// Package rpc is Narad's node-to-node layer (spec/cluster.md §10): gRPC with the typed
// messages of package nodepb, and hashicorp/raft's network transport, both on one TCP
// listener (the cluster port), told apart by the first byte of each connection.
//
// Wiring, from the server's point of view:
//
//	ln, _ := net.Listen("tcp", clusterAddr)
//	mux := rpc.NewMux(ln, secret, logger)
//	sl, _ := rpc.NewStreamLayer(mux, advertiseAddr) // Addr() = advertiseAddr
//	trans := rpc.NewRaftTransport(sl, logger)         // → raft.NewRaft(..., trans)
//	srv := rpc.NewServer(secret, nodeImpl, logger)
//	go srv.Serve(mux.GRPCListener())
//	go mux.Run(ctx)
//	pool := rpc.NewPool(secret) // outgoing calls: pool.Client(member.ClusterAddr)
//
// Every connection and every call proves knowledge of the cluster secret (§10.2): Raft
// connections with a 32-byte proof after the tag byte, gRPC calls with the hex proof in
// metadata. Both are checked in constant time before anything is served.
//
// This package knows nothing of topics, logs or the metastore: servers implement
// nodepb.NodeServer, callers read the HTTP-vocabulary status in each reply.
package rpc
