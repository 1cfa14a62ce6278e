package sweep

import (
	"context"
	"errors"
	"os"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/faults"
)

// sweepDeletedTopicDir removes topics/<name> whose marker names an incarnation the replica no
// longer knows, once the leader confirms it gone (spec/moves.md §9.5: a purge that never
// reached this node because it was down, dead or lagging when the delete committed). The
// engine re-checks under the topic's guard that the record is still absent or another
// incarnation and the marker unchanged, so a recreate served meanwhile keeps its directory.
func (s *Sweeper) sweepDeletedTopicDir(ctx context.Context, name, incarnation string) {
	if !s.confirmedGone(ctx, name, incarnation) {
		return
	}
	if err := faults.Check(FaultBeforeAct); err != nil {
		return
	}
	path := s.dirs.TopicDir(name)
	removed, err := s.cfg.Engine.RemoveDeletedTopicDir(name, incarnation)
	switch {
	case err != nil:
		s.log.Warn("sweep: could not remove a deleted topic's directory", "topic", name,
			"incarnation", incarnation, "path", path, "err", err)
	case removed:
		s.log.Info("sweep: removed a deleted topic's directory the leader confirmed gone", "topic", name,
			"incarnation", incarnation, "path", path, "reason", "incarnation_deleted")
	default:
		s.log.Info("sweep: kept a topic directory that changed under the check", "topic", name,
			"incarnation", incarnation, "path", path)
	}
}

// sweepStale removes .stale/<topic>@<incarnation> dirs once the leader confirms the
// incarnation gone (spec/moves.md §9.5 item 2).
func (s *Sweeper) sweepStale(ctx context.Context) error {
	ents, err := os.ReadDir(s.dirs.StaleRoot())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st, ok := datadir.ParseStaleEntry(ent.Name())
		topic, inc := st.Topic, st.Incarnation
		if !ok || !ent.IsDir() || !s.confirmedGone(ctx, topic, inc) {
			continue
		}
		if err := faults.Check(FaultBeforeAct); err != nil {
			continue
		}
		path := s.dirs.StaleDir(topic, inc)
		removed, err := s.cfg.Engine.RemoveStaleDir(topic, inc)
		switch {
		case err != nil:
			s.log.Warn("sweep: could not remove a deleted incarnation's set-aside directory", "topic", topic,
				"incarnation", inc, "path", path, "err", err)
		case removed:
			s.log.Info("sweep: removed a deleted incarnation's set-aside directory", "topic", topic,
				"incarnation", inc, "path", path, "reason", "incarnation_deleted")
		}
	}
	return nil
}

// confirmedGone asks the leader whether incarnation of topic is gone: the topic is
// authoritatively absent or has another incarnation. Unconfirmed → false (defer).
func (s *Sweeper) confirmedGone(ctx context.Context, topic, incarnation string) bool {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	t, found, err := s.cfg.Store.ConfirmTopic(cctx, topic)
	if err != nil {
		s.log.Debug("sweep: leader read unconfirmed; deferring", "topic", topic, "incarnation", incarnation, "err", err)
		return false
	}
	return !found || t.Incarnation != incarnation
}
