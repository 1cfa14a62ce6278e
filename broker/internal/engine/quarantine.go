package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"narad.dev/broker/internal/durable"
)

// Quarantine (spec/storage.md §16): a copy that may hold the only instance of some records is
// renamed, never deleted. The names are exact patterns every scanner matches (storage.md §1):
//
//	topics/<topic>/pNNNNN.quarantine[-<unixnano>]   a local partition copy
//	.moves/<topic>-<N>.quarantine[-<unixnano>]      a staging copy
//	.stale/<topic>@<incarnation>                    a deleted incarnation's topic dir (§14)
//
// A quarantined copy is never opened as a log and never swept by retention: the registry opens
// only pNNNNN paths of assigned partitions and the cold retention walk visits only those.
const (
	quarantineSuffix = ".quarantine"
	movesDirName     = ".moves"
	staleDirName     = ".stale"
)

// QuarantinedCopy is one copy set aside for an operator.
type QuarantinedCopy struct {
	Path  string
	Bytes int64
}

// QuarantinedCopies lists every quarantined copy under the data dir with its size.
func (e *Engine) QuarantinedCopies() []QuarantinedCopy {
	var out []QuarantinedCopy
	add := func(path string) { out = append(out, QuarantinedCopy{Path: path, Bytes: dirSize(path)}) }
	topics := filepath.Join(e.cfg.DataDir, "topics")
	if tents, err := os.ReadDir(topics); err == nil {
		for _, t := range tents {
			if !t.IsDir() || durable.IsTemp(t.Name()) {
				continue
			}
			pents, err := os.ReadDir(filepath.Join(topics, t.Name()))
			if err != nil {
				continue // removed meanwhile (purge)
			}
			for _, p := range pents {
				if _, ok := parseQuarantinedPartition(p.Name()); ok && p.IsDir() {
					add(filepath.Join(topics, t.Name(), p.Name()))
				}
			}
		}
	}
	moves := filepath.Join(e.cfg.DataDir, movesDirName)
	if ents, err := os.ReadDir(moves); err == nil {
		for _, m := range ents {
			if _, _, ok := parseQuarantinedStaging(m.Name()); ok && m.IsDir() {
				add(filepath.Join(moves, m.Name()))
			}
		}
	}
	stale := filepath.Join(e.cfg.DataDir, staleDirName)
	if ents, err := os.ReadDir(stale); err == nil {
		for _, s := range ents {
			if _, _, ok := parseStaleName(s.Name()); ok && s.IsDir() {
				add(filepath.Join(stale, s.Name()))
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
// (spec/storage.md §16, spec/moves.md §9.7).
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
	to := dir + quarantineSuffix
	for i := int64(0); ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		} else if err != nil {
			return "", err
		}
		to = dir + quarantineSuffix + "-" + strconv.FormatInt(e.now().UnixNano()+i, 10)
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

// parsePartitionDirName returns N for a partition directory name `pNNNNN` (storage.md §1).
func parsePartitionDirName(name string) (int, bool) {
	if len(name) != 6 || name[0] != 'p' || !allDigits(name[1:]) {
		return 0, false
	}
	n, err := strconv.Atoi(name[1:])
	return n, err == nil
}

// parseQuarantinedPartition returns N for `pNNNNN.quarantine` or `pNNNNN.quarantine-<digits>`.
func parseQuarantinedPartition(name string) (int, bool) {
	base, ok := cutQuarantineSuffix(name)
	if !ok {
		return 0, false
	}
	return parsePartitionDirName(base)
}

// parseQuarantinedStaging returns (topic, N) for `<topic>-<N>.quarantine[-<digits>]`.
func parseQuarantinedStaging(name string) (string, int, bool) {
	base, ok := cutQuarantineSuffix(name)
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(base, '-')
	if i <= 0 || !allDigits(base[i+1:]) {
		return "", 0, false
	}
	n, err := strconv.Atoi(base[i+1:])
	if err != nil {
		return "", 0, false
	}
	return base[:i], n, true
}

// parseStaleName returns (topic, incarnation) for `.stale/<topic>@<incarnation>`.
func parseStaleName(name string) (string, string, bool) {
	topic, inc, ok := strings.Cut(name, "@")
	if !ok || topic == "" || inc == "" || strings.ContainsRune(inc, '@') || durable.IsTemp(name) {
		return "", "", false
	}
	return topic, inc, true
}

// cutQuarantineSuffix strips `.quarantine` or `.quarantine-<digits>` from name.
func cutQuarantineSuffix(name string) (string, bool) {
	i := strings.LastIndex(name, quarantineSuffix)
	if i <= 0 {
		return "", false
	}
	rest := name[i+len(quarantineSuffix):]
	if rest != "" && (rest[0] != '-' || !allDigits(rest[1:])) {
		return "", false
	}
	return name[:i], true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
