// Package logrec is a slog handler for tests that keeps every record, so a test can assert on
// exact log lines (the spec names several that operators grep for).
package logrec

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Record is one kept log record; Attrs holds the handler's attributes and the record's own.
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]any
}

// Sink keeps the records of every logger built on it. Safe for concurrent use.
type Sink struct {
	mu   sync.Mutex
	recs []Record
}

// Logger returns a logger that writes every record, at every level, to s.
func (s *Sink) Logger() *slog.Logger { return slog.New(handler{sink: s}) }

// Find returns the records at exactly level whose message contains sub.
func (s *Sink) Find(level slog.Level, sub string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, r := range s.recs {
		if r.Level == level && strings.Contains(r.Msg, sub) {
			out = append(out, r)
		}
	}
	return out
}

// CountAtLeast returns how many records are at level or above.
func (s *Sink) CountAtLeast(level slog.Level) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.recs {
		if r.Level >= level {
			n++
		}
	}
	return n
}

type handler struct {
	sink  *Sink
	attrs []slog.Attr
}

func (h handler) Enabled(context.Context, slog.Level) bool { return true }
func (h handler) WithGroup(string) slog.Handler            { return h }
func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	return handler{sink: h.sink, attrs: append(slices.Clip(h.attrs), as...)}
}

func (h handler) Handle(_ context.Context, r slog.Record) error {
	rec := Record{Level: r.Level, Msg: r.Message, Attrs: map[string]any{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool { rec.Attrs[a.Key] = a.Value.Any(); return true })
	h.sink.mu.Lock()
	h.sink.recs = append(h.sink.recs, rec)
	h.sink.mu.Unlock()
	return nil
}
