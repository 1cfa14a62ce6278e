package noderpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"narad.dev/broker/internal/rpc/nodepb"
)

// joinRPCTimeout bounds one JoinCluster call (docs/internals/metastore.md §14).
const joinRPCTimeout = 5 * time.Second

// AskToJoin sends JoinCluster (op 21) to addr and, on a 421 with a hint, to the leader. ok means
// a cluster exists: this node was admitted, or a peer knows a leader.
func (p Peers) AskToJoin(ctx context.Context, addr, id, advertise string) (ok bool, err error) {
	for hop := 0; hop < 2 && addr != ""; hop++ {
		c, err := p.client(addr)
		if err != nil {
			return false, err
		}
		jctx, cancel := context.WithTimeout(ctx, joinRPCTimeout)
		rep, err := c.JoinCluster(jctx, &nodepb.JoinClusterRequest{Id: id, ClusterAddr: advertise})
		cancel()
		if err != nil {
			return false, err
		}
		switch rep.Status {
		case 200:
			return true, nil
		case 421:
			if rep.LeaderAddr == "" || rep.LeaderAddr == advertise {
				return false, errors.New("peer knows no leader")
			}
			addr = rep.LeaderAddr
			ok = true // a leader exists somewhere: never bootstrap a second cluster
		default:
			return ok, fmt.Errorf("peer %s answered %d: %s", addr, rep.Status, rep.Error)
		}
	}
	return ok, nil
}
