package fanout

import (
	"context"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
)

// sweepConfirmTimeout bounds one leader-confirmed read of the orphan sweep.
const sweepConfirmTimeout = 10 * time.Second

// sweep deletes orphan cursor files (docs/internals/fanout.md §4 item 6, docs/internals/fanout.md §10): in every owned parent partition
// directory, a cursor file whose link the local replica no longer has (not in want) and that
// no cursor owns is deleted only after a leader-confirmed read says the link is dissolved
// (child absent or attached elsewhere). Unconfirmed → kept until the next sweep. A file whose
// child cannot be read from it (corrupt) is kept: its cursor re-anchors it if the link exists.
func (r *Runner) sweep(ctx context.Context, want map[slot]bool) {
	type link struct{ parent, child string }
	verdict := map[link]bool{} // link → dissolved (confirmed), per sweep
	for _, pd := range r.host.OwnedPartitionDirs() {
		files, err := cursorfile.List(ctx, pd.Dir)
		if err != nil {
			r.log.Warn("fanout sweep: list partition dir", "topic", pd.Topic, "partition", pd.Partition, "err", err)
			continue
		}
		for _, f := range files {
			child := f.Child
			if child == "" {
				continue
			}
			s := slot{parent: pd.Topic, partition: pd.Partition, child: child}
			if want[s] || r.busy(s) {
				continue
			}
			l := link{pd.Topic, child}
			dissolved, known := verdict[l]
			if !known {
				cctx, cancel := context.WithTimeout(ctx, sweepConfirmTimeout)
				_, attached, err := r.host.LeaderLink(cctx, pd.Topic, child)
				cancel()
				if err != nil {
					r.log.Info("fanout sweep: link state unconfirmed; keeping cursor file",
						"parent", pd.Topic, "child", child, "err", err)
					continue // not cached: the next file of this link asks again
				}
				dissolved = !attached
				verdict[l] = dissolved
			}
			if !dissolved || r.busy(s) {
				continue
			}
			if err := cursorfile.Remove(f.Path); err != nil {
				r.log.Warn("fanout sweep: remove orphan cursor file", "path", f.Path, "err", err)
				continue
			}
			r.log.Info("fanout sweep removed orphan cursor file", "parent", pd.Topic,
				"partition", pd.Partition, "child", child)
		}
	}
}
