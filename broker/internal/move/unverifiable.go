package move

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"narad.dev/broker/internal/datadir"
	"narad.dev/broker/internal/durable"
)

// A move blocked as copy_unverifiable gets exactly one more try per destination restart
// (docs/cluster.md, "A node that dies mid-move"): the blocked worker leaves a note beside its staging
// directory, <staging>.unverifiable, naming the move's source and incarnation. A worker that
// finds the note for the same move starts with one verify failure counted, so its next one
// blocks the move again instead of copying once more from scratch. The note goes when the
// worker ends for any reason but the process stopping (flip, end, re-plan, abort), and the
// first caught-up pass after a start removes notes of moves no longer aimed at this node.

// unverifiableNote is the note's content: the move it speaks for.
type unverifiableNote struct {
	Source      string `json:"source"`
	Incarnation string `json:"incarnation"`
}

func (w *worker) notePath() string { return datadir.UnverifiableNotePath(w.staging) }

// writeUnverifiableNote records durably that this move is blocked as copy_unverifiable.
func (w *worker) writeUnverifiableNote() {
	b, _ := json.Marshal(unverifiableNote{Source: w.source, Incarnation: w.incarnation})
	if err := durable.MkdirAll(filepath.Dir(w.notePath())); err != nil {
		w.log.Warn("move: cannot record the blocked copy; a restart will copy twice more", "err", err)
		return
	}
	if err := durable.WriteFileAtomic(w.notePath(), b); err != nil {
		w.log.Warn("move: cannot record the blocked copy; a restart will copy twice more", "err", err)
	}
}

// readUnverifiableNote reports whether this move was blocked as copy_unverifiable before the
// restart. A note of another move (source or incarnation changed) is removed.
func (w *worker) readUnverifiableNote() bool {
	b, err := os.ReadFile(w.notePath())
	if err != nil {
		return false
	}
	var n unverifiableNote
	if json.Unmarshal(b, &n) == nil && n.Source == w.source && n.Incarnation == w.incarnation {
		return true
	}
	w.removeUnverifiableNote()
	return false
}

func (w *worker) removeUnverifiableNote() {
	if err := os.Remove(w.notePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.log.Warn("move: cannot remove the blocked-copy note", "path", w.notePath(), "err", err)
	}
}

// pruneUnverifiableNotes removes the notes in dir (the staging directories' parent) of moves
// that desired no longer aims at this node with the same source and incarnation.
func pruneUnverifiableNotes(dir, self string, desired map[key]want) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), datadir.UnverifiableSuffix) || durable.IsTemp(e.Name()) {
			continue
		}
		keep := false
		if note, ok := datadir.ParseMovesEntry(e.Name()); ok && note.Kind == datadir.UnverifiableNote {
			d, in := desired[key{topic: note.Topic, partition: note.Partition, target: self}]
			var n unverifiableNote
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); in && err == nil && json.Unmarshal(b, &n) == nil {
				keep = n.Source == d.source && n.Incarnation == d.incarnation
			}
		}
		if !keep {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
