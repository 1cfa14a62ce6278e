package cursorfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
)

// Found is one cursor file of a partition directory, as List reports it.
type Found struct {
	Path string
	// Child is the child the file belongs to: from the record of a current-layout file, from
	// the name of a legacy-layout one. "" when a current-layout file could not be read (Err).
	Child string
	State State // zero when Err is set
	Err   error // ErrCorrupt (after re-reads) or an I/O error
	// Legacy: the file is named fanout-<child>.offset, the layout before record version 2.
	Legacy bool
	// Superseded: a legacy file whose child also has a current-layout file (an interrupted
	// migration). The current file is the position; the next Open removes this one.
	Superseded bool
}

// List returns every cursor file of partitionDir, current layout first, each read with the
// re-read policy of Read. Temp files and other names are skipped, as is a current-layout file
// that vanished meanwhile. A missing directory is an empty list.
func List(ctx context.Context, partitionDir string) ([]Found, error) {
	ents, err := os.ReadDir(partitionDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var current, legacy []Found
	have := map[string]bool{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		path := filepath.Join(partitionDir, name)
		switch child, isLegacy := legacyChild(name); {
		case isCurrentName(name):
			st, err := Read(ctx, path)
			if errors.Is(err, ErrNotExist) {
				continue
			}
			f := Found{Path: path, State: st, Err: err, Child: st.Child}
			if err == nil && (st.Child == "" || FileName(st.Child) != name) {
				f = Found{Path: path, Err: corruptf("%s does not name its child", name)}
			}
			if f.Err == nil {
				have[f.Child] = true
			}
			current = append(current, f)
		case isLegacy:
			st, err := Read(ctx, path)
			if errors.Is(err, ErrNotExist) {
				continue
			}
			if err == nil {
				st.Child = child
			}
			legacy = append(legacy, Found{Path: path, Child: child, State: st, Err: err, Legacy: true})
		}
	}
	for i := range legacy {
		legacy[i].Superseded = have[legacy[i].Child]
	}
	return append(current, legacy...), nil
}
