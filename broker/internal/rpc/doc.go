// Package rpc is Narad's node-to-node layer (docs/internals/node-rpc.md): gRPC with the typed
// messages of package nodepb, and hashicorp/raft's network transport, both on one TCP
// listener (the cluster port), told apart by the first byte of each connection.
//
// Wiring, from the server's point of view:
//
//	ct, _ := rpc.LoadClusterTLS(certFile, keyFile, caFile) // optional; caFile "" = no mTLS
//	ln, _ := net.Listen("tcp", clusterAddr)
//	mux := rpc.NewMux(ln, secret, logger, rpc.WithTLS(ct), rpc.WithNodeID(nodeID))
//	sl, _ := rpc.NewStreamLayer(mux, advertiseAddr) // Addr() = advertiseAddr; dials as mux serves
//	trans := rpc.NewRaftTransport(sl, logger)         // → raft.NewRaft(..., trans)
//	srv := rpc.NewServer(secret, nodeImpl, logger, rpc.WithTLS(ct))
//	go srv.Serve(mux)
//	go mux.Run(ctx)
//	pool := rpc.NewPool(secret, rpc.WithTLS(ct), rpc.WithNodeID(nodeID)) // outgoing calls: pool.Client(member.ClusterAddr)
//
// Without WithTLS (or with WithTLS(nil)) everything is plaintext, as before cluster TLS.
//
// Every connection, gRPC or Raft, runs a mutual challenge-response handshake after its kind
// byte (inside TLS under cluster TLS) before anything else of it is read: both sides prove
// knowledge of the cluster secret with an HMAC over fresh nonces of both sides (handshake.go),
// so a recorded exchange is worthless on any other connection. Under mutual TLS the peer
// certificate must also chain to the cluster CA.
//
// This package knows nothing of topics, logs or the metastore: servers implement
// nodepb.NodeServer, callers read the HTTP-vocabulary status in each reply.
package rpc
