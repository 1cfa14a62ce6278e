package server

import (
	"context"
	"errors"

	"narad.dev/broker/internal/api"
	"narad.dev/broker/internal/controller"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/noderpc"
)

var _ api.LeaderElector = (*clusterService)(nil)

// ElectLeaders serves POST /v1/cluster/elect-leaders (docs/internals/http-api.md §2.22): the
// controller's planner runs on the Raft leader, here directly or through op 36 elsewhere (a
// leadership that moved on the way answers 503, like every cluster write). Refusals keep
// their kind: invalid (400), not found (404); anything else is 503.
func (c *clusterService) ElectLeaders(ctx context.Context, req controller.ElectRequest) ([]controller.Election, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterWriteWait)
	defer cancel()
	call := noderpc.ElectCall{Preferred: req.Preferred, Topic: req.Topic, Partition: req.Partition}
	var es []controller.Election
	var err error
	if c.store.IsLeader() {
		es, err = noderpc.RunElectLeaders(ctx, c.mv, call)
	} else if _, addr := c.store.Leader(); addr == "" {
		err = meta.ErrNoLeader
	} else {
		es, err = c.peers.ElectLeaders(ctx, addr, call)
	}
	switch {
	case err == nil:
		return es, nil
	case errors.Is(err, errcode.ErrInvalid):
		return nil, &api.ClusterError{Kind: api.ErrInvalid, Msg: err.Error()}
	case errors.Is(err, errcode.ErrNotFound):
		return nil, &api.ClusterError{Kind: api.ErrNotFound, Msg: err.Error()}
	}
	return nil, &api.ClusterError{Kind: api.ErrUnavailable, Msg: err.Error()}
}
