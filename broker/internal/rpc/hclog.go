package rpc

import (
	"context"
	"io"
	"log"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hcLogger adapts a *slog.Logger to the hclog.Logger that hashicorp/raft's transport wants.
// hclog's alternating key/value arguments map one to one onto slog attributes; hclog Trace
// maps to slog Debug-4. The hclog level (SetLevel) filters before slog's handler does.
type hcLogger struct {
	base    *slog.Logger // the caller's logger, without name or implied args
	l       *slog.Logger // base with component=name and the implied args
	name    string
	implied []any
	level   *atomic.Int32 // hclog.Level, shared by loggers derived with With/Named
}

var _ hclog.Logger = (*hcLogger)(nil)

// newHCLogger wraps l (nil → discard), tagging records with component=name.
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	lv := new(atomic.Int32)
	lv.Store(int32(hclog.Trace))
	return (&hcLogger{base: l, level: lv}).derive(name, nil)
}

// derive returns a copy of h with the given name and implied args.
func (h *hcLogger) derive(name string, implied []any) *hcLogger {
	c := *h
	c.name = name
	c.implied = implied
	c.l = h.base
	if name != "" {
		c.l = c.l.With("component", name)
	}
	if len(implied) > 0 {
		c.l = c.l.With(implied...)
	}
	return &c
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hcLogger) enabled(level hclog.Level) bool {
	if level == hclog.Off || level < hclog.Level(h.level.Load()) {
		return false
	}
	return h.l.Enabled(context.Background(), slogLevel(level))
}

// Log implements hclog.Logger.
func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !h.enabled(level) {
		return
	}
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}

// Trace implements hclog.Logger.
func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (h *hcLogger) Info(msg string, args ...any) { h.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (h *hcLogger) Warn(msg string, args ...any) { h.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

// IsTrace implements hclog.Logger.
func (h *hcLogger) IsTrace() bool { return h.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (h *hcLogger) IsDebug() bool { return h.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (h *hcLogger) IsInfo() bool { return h.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (h *hcLogger) IsWarn() bool { return h.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (h *hcLogger) IsError() bool { return h.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (h *hcLogger) ImpliedArgs() []any { return h.implied }

// With implements hclog.Logger.
func (h *hcLogger) With(args ...any) hclog.Logger {
	return h.derive(h.name, append(append([]any(nil), h.implied...), args...))
}

// Name implements hclog.Logger.
func (h *hcLogger) Name() string { return h.name }

// Named implements hclog.Logger.
func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

// ResetNamed implements hclog.Logger.
func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	return h.derive(name, h.implied)
}

// SetLevel implements hclog.Logger.
func (h *hcLogger) SetLevel(level hclog.Level) { h.level.Store(int32(level)) }

// GetLevel implements hclog.Logger.
func (h *hcLogger) GetLevel() hclog.Level { return hclog.Level(h.level.Load()) }

// StandardLogger implements hclog.Logger.
func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	level := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = slogLevel(opts.ForceLevel)
	}
	return slog.NewLogLogger(h.l.Handler(), level)
}

// StandardWriter implements hclog.Logger.
func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(opts).Writer()
}
