// Package noderpc is the node-to-node RPC of a cluster, both of its sides: the Service a node
// answers its peers with (the nodepb.Node gRPC service, registered with rpc.NewServer), and
// Peers, the client a node asks its peers and the Raft leader with. The transport (TLS,
// pooled connections, the cluster-port mux) is package rpc; the messages are rpc/nodepb.
//
// Every reply carries its outcome as a status in HTTP vocabulary (421: not the owner or not
// the leader) with an error message and a reason code. Both sides translate with the planes
// of package errcode and nothing else: the Service answers errcode.<Plane>.Reply(err), and
// Peers reads errcode.<Plane>.Error(status, reason, msg) back into the same sentinels, so an
// engine error survives the hop. The owner side never forwards: a request about a partition
// this node does not own is answered 421, so two nodes with diverging replicas cannot bounce
// a request between them.
//
// Files: service.go (data-plane ops: consume, stats, commit, get topic, join, node status,
// ack), service_leader.go (ops only the Raft leader serves, and the commit-notice stream),
// service_fanout.go (attach, detach, fan-out cursors), service_move.go (the move source and
// decommission ops); peers.go (the client of the data and leader ops), peers_fanout.go,
// peers_move.go (the transfer.Source of a move destination, decommission and move reports),
// peers_join.go (asking to be admitted), prober.go (the controller's member probe),
// watch.go (the commit-notice streams this node keeps open to every peer).
package noderpc
