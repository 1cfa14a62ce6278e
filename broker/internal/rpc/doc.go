// Package rpc is Narad's node-to-node layer (spec/cluster.md §10): gRPC with the typed
// messages of package nodepb, and hashicorp/raft's network transport, both on one TCP
// listener (the cluster port), told apart by the first byte of each connection.
//
// Wiring, from the server's point of view:
//
//	ct, _ := rpc.LoadClusterTLS(certFile, keyFile, caFile) // optional; caFile "" = no mTLS
//	ln, _ := net.Listen("tcp", clusterAddr)
//	mux := rpc.NewMux(ln, secret, logger, rpc.WithTLS(ct))
//	sl, _ := rpc.NewStreamLayer(mux, advertiseAddr) // Addr() = advertiseAddr; dials as mux serves
//	trans := rpc.NewRaftTransport(sl, logger)         // → raft.NewRaft(..., trans)
//	srv := rpc.NewServer(secret, nodeImpl, logger, rpc.WithTLS(ct))
//	go srv.Serve(mux.GRPCListener())
//	go mux.Run(ctx)
//	pool := rpc.NewPool(secret, rpc.WithTLS(ct)) // outgoing calls: pool.Client(member.ClusterAddr)
//
// Without WithTLS (or with WithTLS(nil)) everything is plaintext, as before cluster TLS.
//
// Every connection and every call proves knowledge of the cluster secret (§10.2): Raft
// connections with a 32-byte proof after the tag byte (inside TLS under cluster TLS), gRPC
// calls with the hex proof in metadata. Both are checked in constant time before anything is
// served. Under mutual TLS the peer certificate must also chain to the cluster CA.
//
// This package knows nothing of topics, logs or the metastore: servers implement
// nodepb.NodeServer, callers read the HTTP-vocabulary status in each reply.
package rpc
