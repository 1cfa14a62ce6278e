package controller

import (
	"context"
	"errors"

	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/placement"
)

// assignUnassigned is C2 (docs/internals/metastore.md §12): every partition below a topic's count that
// has no assignment gets an owner from the placement rules. Parents and standalone topics go
// first, so a child whose parent partition was unassigned at the start of the pass is placed
// in the same pass when the parent's could be; anything still deferred is retried next pass.
// Runs under the placement lock.
func (c *Controller) assignUnassigned(ctx context.Context) error {
	candidates := placement.Candidates(c.store.Members())
	if len(candidates) == 0 {
		return nil
	}
	topics := c.store.Topics("", 0)
	var children []meta.Topic
	for _, t := range topics {
		if t.Role == meta.RoleChild && t.Parent != "" {
			children = append(children, t)
			continue
		}
		if err := c.assignTopic(ctx, candidates, t, nil); err != nil {
			return err
		}
	}
	for _, t := range children {
		var parent *placement.Parent
		if pt, ok := c.store.Topic(t.Parent); ok {
			parent = placement.ParentOf(pt.Partitions, c.store.Assignments(pt.Name))
		}
		if err := c.assignTopic(ctx, candidates, t, parent); err != nil {
			return err
		}
	}
	return nil
}

func (c *Controller) assignTopic(ctx context.Context, candidates []string, t meta.Topic, parent *placement.Parent) error {
	missing := placement.Missing(t.Partitions, c.store.Assignments(t.Name))
	if len(missing) == 0 {
		return nil
	}
	out, deferred := placement.Place(candidates, t.Name, missing, parent)
	for _, a := range out {
		err := c.store.AssignPartition(ctx, a)
		switch {
		case err == nil:
			c.logger.Info("partition assigned", "topic", a.Topic, "partition", a.Partition, "owner", a.Owner)
		case errors.Is(err, meta.ErrExists), errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrInvalid):
			// Assigned meanwhile (a create raced us), topic deleted, or partition count lowered
			// by a recreate: the next pass re-reads.
			c.logger.Debug("partition not assigned", "topic", a.Topic, "partition", a.Partition, "err", err)
		default:
			return err
		}
	}
	if len(deferred) > 0 {
		c.logger.Info("child partitions deferred until their parent partitions are placed",
			"topic", t.Name, "parent", t.Parent, "partitions", deferred)
	}
	return nil
}
