package fanout

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"narad.dev/broker/internal/fanout/cursorfile"
)

// sweepConfirmTimeout bounds one leader-confirmed read of the orphan sweep.
const sweepConfirmTimeout = 10 * time.Second

// sweep deletes orphan cursor files (R-REC 6, R-EPOCH 4): in every owned parent partition
// directory, a fanout-<child>.offset whose link the local replica no longer has (not in want)
// and that no cursor owns is deleted only after a leader-confirmed read says the link is
// dissolved (child absent or attached elsewhere). Unconfirmed → kept until the next sweep.
func (r *Runner) sweep(ctx context.Context, want map[slot]bool) {
	type link struct{ parent, child string }
	verdict := map[link]bool{} // link → dissolved (confirmed), per sweep
	for _, pd := range r.host.OwnedPartitionDirs() {
		entries, err := os.ReadDir(pd.Dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.log.Warn("fanout sweep: list partition dir", "topic", pd.Topic, "partition", pd.Partition, "err", err)
			}
			continue
		}
		for _, e := range entries {
			child, ok := cursorfile.ChildFromFileName(e.Name())
			if !ok || e.IsDir() {
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
			path := filepath.Join(pd.Dir, e.Name())
			if err := cursorfile.Remove(path); err != nil {
				r.log.Warn("fanout sweep: remove orphan cursor file", "path", path, "err", err)
				continue
			}
			r.log.Info("fanout sweep removed orphan cursor file", "parent", pd.Topic,
				"partition", pd.Partition, "child", child)
		}
	}
}
