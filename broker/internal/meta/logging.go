package meta

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/go-hclog"
)

// discardLogger is used when a caller passes a nil *slog.Logger.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// hclogAdapter routes hashicorp/raft's hclog output into slog. Records below minLevel are
// dropped (raft's info chatter stays out of the service log); the rest keep their key/value
// pairs and carry component=<name>.
type hclogAdapter struct {
	l        *slog.Logger
	name     string
	minLevel hclog.Level
	implied  []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHCLogAdapter(l *slog.Logger, name string, minLevel hclog.Level) *hclogAdapter {
	return &hclogAdapter{l: l, name: name, minLevel: minLevel}
}

func slogLevel(l hclog.Level) slog.Level {
	switch {
	case l <= hclog.Debug:
		return slog.LevelDebug
	case l == hclog.Info:
		return slog.LevelInfo
	case l == hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// The methods below implement hclog.Logger.

// Log emits one record when level ≥ minLevel.
func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if level < a.minLevel || level == hclog.Off {
		return
	}
	attrs := make([]any, 0, 2+len(a.implied)+len(args))
	attrs = append(attrs, "component", a.name)
	attrs = append(attrs, a.implied...)
	for _, v := range args {
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				v = fmt.Sprintf(format, f[1:]...)
			}
		}
		attrs = append(attrs, v)
	}
	a.l.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return a.minLevel <= hclog.Trace }
func (a *hclogAdapter) IsDebug() bool                 { return a.minLevel <= hclog.Debug }
func (a *hclogAdapter) IsInfo() bool                  { return a.minLevel <= hclog.Info }
func (a *hclogAdapter) IsWarn() bool                  { return a.minLevel <= hclog.Warn }
func (a *hclogAdapter) IsError() bool                 { return a.minLevel <= hclog.Error }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.implied }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(l hclog.Level)        { a.minLevel = l }
func (a *hclogAdapter) GetLevel() hclog.Level         { return a.minLevel }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any(nil), a.implied...), args...)
	return &c
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if a.name != "" {
		name = a.name + "." + name
	}
	c.name = name
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	level := hclog.Info
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		level = opts.ForceLevel
	}
	return &hclogWriter{a: a, level: level}
}

// hclogWriter turns lines written through a standard *log.Logger into records at one level.
type hclogWriter struct {
	a     *hclogAdapter
	level hclog.Level
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	w.a.Log(w.level, strings.TrimSpace(string(p)))
	return len(p), nil
}

// pebbleLogger routes pebble's logging into slog: info → debug, errors → warn.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Warn(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble")
	panic("meta: pebble fatal: " + msg)
}

// pebbleOptions are the options of both metastore DBs (small, metadata-sized). fs nil → disk.
func pebbleOptions(fs vfs.FS, logger *slog.Logger) *pebble.Options {
	if logger == nil {
		logger = discardLogger()
	}
	o := &pebble.Options{
		FS:                 fs,
		Logger:             pebbleLogger{l: logger},
		FormatMajorVersion: pebble.FormatNewest,
	}
	return o
}
