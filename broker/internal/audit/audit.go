// Package audit writes Narad's audit trail: one structured log record for every
// security-relevant change (users and grants, cluster membership, decommissions, partition
// moves, remote fan-out links) and for refused admin actions, with the same stable keys
// everywhere, so one query finds them all (docs/operating.md, Audit events).
//
// A record is a log line with message "audit" and the keys event, actor, target, outcome and
// node, followed by event-specific attributes. Every value is bounded (MaxValueLen) and an
// attribute whose key names a credential is never written, so no client-chosen string can grow
// a line without bound and no password reaches the log.
package audit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Outcomes of an audited action.
const (
	OK      = "ok"      // the change took effect
	Denied  = "denied"  // refused by authorization or a safety rule (403, 409)
	Failed  = "failed"  // refused for another reason, nothing changed (400, 404)
	Unknown = "unknown" // the proposal's fate is not known (503, timeout): it may have taken effect
)

// Actors that are not users.
const (
	ActorSecurityOff = "(security-off)" // requests on a node with authentication off
	ActorController  = "(controller)"   // the Raft leader's controller acting on its own
)

// MaxValueLen bounds every string value of a record, in bytes.
const MaxValueLen = 256

// Message is the log message of every audit record.
const Message = "audit"

// Event is one audited action. Name is a fixed string of the caller's (user.create,
// cluster.decommission, ...); Actor the username or node that asked for it, or one of the
// Actor* constants; Target what it acted on.
type Event struct {
	Name    string
	Actor   string
	Target  string
	Outcome string
	// Attrs are extra key/value pairs (slog style: alternating keys and values, or
	// slog.Attr). Values are rendered with fmt and bounded; keys naming credentials are dropped.
	Attrs []any
}

// Logger writes audit records for one node. The zero value and nil discard everything.
// It is safe for concurrent use.
type Logger struct {
	log  *slog.Logger
	node string
}

// New returns a Logger writing to log (nil → discard) with node as every record's node.
func New(log *slog.Logger, node string) *Logger {
	return &Logger{log: log, node: node}
}

// Record writes e at info level.
func (l *Logger) Record(ctx context.Context, e Event) {
	if l == nil || l.log == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("event", clip(e.Name)),
		slog.String("actor", clip(e.Actor)),
		slog.String("target", clip(e.Target)),
		slog.String("outcome", clip(e.Outcome)),
		slog.String("node", clip(l.node)),
	}
	args := e.Attrs
	for len(args) > 0 {
		var a slog.Attr
		switch k := args[0].(type) {
		case slog.Attr:
			a, args = k, args[1:]
		case string:
			if len(args) < 2 {
				a, args = slog.String("!BADKEY", clip(k)), nil
				break
			}
			a, args = slog.Any(k, args[1]), args[2:]
		default:
			a, args = slog.Any("!BADKEY", k), args[1:]
		}
		if secretKey(a.Key) || reserved(a.Key) {
			continue
		}
		attrs = append(attrs, bounded(a))
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, Message, attrs...)
}

// bounded renders a's value as a bounded string, keeping numbers and booleans as they are.
func bounded(a slog.Attr) slog.Attr {
	key := clip(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindFloat64, slog.KindDuration:
		return slog.Attr{Key: key, Value: v}
	case slog.KindString:
		return slog.String(key, clip(v.String()))
	}
	if err, ok := v.Any().(error); ok && err != nil {
		return slog.String(key, clip(err.Error()))
	}
	return slog.String(key, clip(fmt.Sprint(v.Any())))
}

// secretKey reports whether an attribute key names a credential, whose value is never logged.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"password", "secret", "token", "credential", "authorization", "hash"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// reserved reports whether k is one of the fixed keys an attribute may not override.
func reserved(k string) bool {
	switch k {
	case "event", "actor", "target", "outcome", "node", "msg", "level", "time":
		return true
	}
	return false
}

// clip bounds s to MaxValueLen bytes, marking a cut with "…".
func clip(s string) string {
	if len(s) <= MaxValueLen {
		return s
	}
	cut := MaxValueLen
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 { // never split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
