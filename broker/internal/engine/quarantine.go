package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
)

// Quarantine (docs/internals/storage-format.md §17): a copy that may hold the only instance of some records is
// renamed, never deleted. The names are the datadir package's (its doc draws the tree):
//
//	topics/<topic>/pNNNNN.quarantine[-<unixnano>]   a local partition copy
//	.moves/<topic>-<N>.quarantine[-<unixnano>]      a staging copy
//	.stale/<topic>@<incarnation>                    a deleted incarnation's topic dir (§14)
//
// A quarantined copy is never opened as a log and never swept by retention: the registry opens
// only pNNNNN paths of assigned partitions and the cold retention walk visits only those.

// QuarantinedCopy is one copy set aside for an operator.
type QuarantinedCopy struct {
	Path  string
	Bytes int64
}

// QuarantinedCopies lists every quarantined copy under the data dir with its size.
func (e *Engine) QuarantinedCopies() []QuarantinedCopy {
	var out []QuarantinedCopy
	add := func(path string) { out = append(out, QuarantinedCopy{Path: path, Bytes: dirSize(path)}) }
	dirs := e.layout()
	if tents, err := os.ReadDir(dirs.Topics()); err == nil {
		for _, t := range tents {
			topic, ok := datadir.ParseTopicDirName(t.Name())
			if !t.IsDir() || !ok {
				continue
			}
			pents, err := os.ReadDir(dirs.TopicDir(topic))
			if err != nil {
				continue // removed meanwhile (purge)
			}
			for _, p := range pents {
				if en, ok := datadir.ParsePartitionEntry(p.Name()); ok && en.Kind == datadir.QuarantinedPartition && p.IsDir() {
					add(filepath.Join(dirs.TopicDir(topic), p.Name()))
				}
			}
		}
	}
	if ents, err := os.ReadDir(dirs.Moves()); err == nil {
		for _, m := range ents {
			if en, ok := datadir.ParseMovesEntry(m.Name()); ok && en.Kind == datadir.QuarantinedStaging && m.IsDir() {
				add(filepath.Join(dirs.Moves(), m.Name()))
			}
		}
	}
	if ents, err := os.ReadDir(dirs.StaleRoot()); err == nil {
		for _, s := range ents {
			if _, ok := datadir.ParseStaleEntry(s.Name()); ok && s.IsDir() {
				add(filepath.Join(dirs.StaleRoot(), s.Name()))
			}
		}
	}
	return out
}

// refreshQuarantine recounts the quarantined copies into narad_quarantined_copies/bytes and
// returns them.
func (e *Engine) refreshQuarantine() []QuarantinedCopy {
	qs := e.QuarantinedCopies()
	var bytes int64
	for _, q := range qs {
		bytes += q.Bytes
	}
	e.m.QuarantinedCopies.Set(float64(len(qs)))
	e.m.QuarantinedBytes.Set(float64(bytes))
	return qs
}

// pollQuarantine refreshes the quarantine gauges (the data-dir poller, every 30 s); at startup
// it also lists every quarantined copy at error level, for an operator to reconcile
// (docs/internals/storage-format.md §17, docs/internals/moves.md §9.7).
func (e *Engine) pollQuarantine(startup bool) {
	qs := e.refreshQuarantine()
	if !startup {
		return
	}
	for _, q := range qs {
		e.log.Error("quarantined copy", "path", q.Path, "bytes", q.Bytes)
	}
	e.quarantineListed.Store(true)
}

// quarantineDir renames the partition directory dir to the first free name of
// dir.quarantine, dir.quarantine-<unixnano> and fsyncs the parent. The caller holds the
// topic's open guard exclusively with the partition's log closed.
func (e *Engine) quarantineDir(dir string) (string, error) {
	to := datadir.QuarantineName(dir)
	for i := int64(0); ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return "", err
		}
		to = datadir.QuarantineNameSeq(dir, e.now().UnixNano()+i)
	}
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", dir, err)
	}
	if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
		return to, fmt.Errorf("quarantine %s: sync dir: %w", dir, err)
	}
	e.refreshQuarantine()
	return to, nil
}
