package meta

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Remote-link start modes (docs/internals/fanout.md §13 rule 4): where a new remote link's cursors start
// on each parent partition.
const (
	StartAttach           = "attach"            // the committed HWM while the attach ran (default)
	StartConsumerFrontier = "consumer_frontier" // the parent's committed consumer offset
	StartOldest           = "oldest"            // the oldest retained record
)

// RemotePrefix starts every remote link id and listing name; topic names cannot contain ':',
// so a child name with this prefix never collides with a local child.
const RemotePrefix = "remote:"

// RemoteLink is a remote child of a parent (docs/internals/fanout.md §13), stored under
// r/<parent>\x00<id>. Its cursors are the fan-out cursors of the parent partitions, named by
// ID; only the commit differs (a sender into the target cluster's batch produce).
//
// The password is stored sealed (PasswordSealed, credseal: encrypted with a key derived from
// the cluster secret, bound to the link's parent and id) by the node that took the attach,
// before the proposal: the Raft log, its snapshots and the FSM never hold it in clear.
// Password is the plaintext form only older versions wrote; it is still read. Neither is
// ever logged (LogValue omits them), echoed by a listing, an error or an audit record.
type RemoteLink struct {
	Parent         string   `json:"parent"`
	ID             string   `json:"id"`   // remote:<topic>@<host:port of URLs[0]>
	URLs           []string `json:"urls"` // target base URLs, tried in order (failover)
	Topic          string   `json:"topic"`
	User           string   `json:"user,omitempty"`
	Password       string   `json:"password,omitempty"`        // legacy plaintext (older versions)
	PasswordSealed string   `json:"password_sealed,omitempty"` // credseal form; see SealAAD
	DelayMs        int64    `json:"delay_ms,omitempty"`
	Start          string   `json:"start"`
	AttachEpoch    string   `json:"attach_epoch"`
	AttachOffsets  []int64  `json:"attach_offsets"` // index = parent partition; per Start
	CreatedAt      int64    `json:"created_at"`     // Unix seconds, stamped by the proposer
}

// RemoteRef is a remote link as the parent topic record lists it (no target, no credentials):
// enough to count the parent's children and to confirm an epoch with a leader read of the
// parent.
type RemoteRef struct {
	ID    string `json:"id"`
	Epoch string `json:"epoch"`
}

// Name is the listing name of the link: remote:<first url>/<topic>.
func (l RemoteLink) Name() string {
	if len(l.URLs) == 0 {
		return RemotePrefix + "/" + l.Topic
	}
	return RemotePrefix + strings.TrimRight(l.URLs[0], "/") + "/" + l.Topic
}

// LogValue keeps the password out of every log line.
func (l RemoteLink) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", l.ID), slog.String("topic", l.Topic),
		slog.Any("urls", l.URLs), slog.String("user", l.User), slog.String("epoch", l.AttachEpoch))
}

// String keeps the password out of %v formatting.
func (l RemoteLink) String() string {
	return fmt.Sprintf("remote link %s (parent %s, epoch %s)", l.ID, l.Parent, l.AttachEpoch)
}

// SealAAD is the associated data a link's sealed password is bound to: a sealed value copied
// into another link's record does not open.
func SealAAD(parent, id string) string { return "remote-link\x00" + parent + "\x00" + id }

// IsRemoteID reports whether a child name is a remote link id.
func IsRemoteID(child string) bool { return strings.HasPrefix(child, RemotePrefix) }

// RemoteID returns the id of a link to topic at the first URL: remote:<topic>@<host:port>.
func RemoteID(firstURL, topic string) (string, error) {
	u, err := url.Parse(firstURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("bad target url %q", firstURL)
	}
	return RemotePrefix + topic + "@" + u.Host, nil
}

// MaxRemoteHostLen bounds a target URL's host: the longest DNS name (253 bytes). It keeps every
// link id (remote:<topic>@<host:port>, at most 7 + 255 + 1 + 253 + 8 bytes) inside what a
// fan-out cursor record holds (cursorfile.MaxChildLen), so an accepted link can always anchor
// its cursors.
const MaxRemoteHostLen = 253

// ParseRemoteURLs splits the comma-separated target URL list and checks each one: http or
// https, a host with an explicit port, no path beyond "/", no query, fragment or user info.
func ParseRemoteURLs(list string) ([]string, error) {
	var out []string
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			return nil, fmt.Errorf("empty target url in %q", list)
		case err != nil:
			return nil, fmt.Errorf("bad target url %q", raw)
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("target url %q: scheme must be http or https", raw)
		case u.Host == "" || u.Port() == "" || u.Hostname() == "":
			return nil, fmt.Errorf("target url %q: host:port required", raw)
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
			return nil, fmt.Errorf("target url %q: only scheme://host:port is allowed", raw)
		case !hostChars(u.Host):
			return nil, fmt.Errorf("target url %q: bad host", raw)
		case len(u.Hostname()) > MaxRemoteHostLen:
			return nil, fmt.Errorf("target url host is longer than %d bytes", MaxRemoteHostLen)
		}
		out = append(out, u.Scheme+"://"+u.Host)
	}
	if len(out) > 8 {
		return nil, fmt.Errorf("at most 8 target urls")
	}
	return out, nil
}

// hostChars reports whether a URL's host:port holds only the bytes of a DNS name, an IP
// literal and a port: letters, digits, '-', '.', '_', ':', '[' and ']' (no IPv6 zone).
// A host name outside ASCII must be written in its IDNA (punycode) form. The link id a host
// goes into is also a fan-out cursor record field and a log attribute, so quotes,
// backslashes, spaces and control bytes, which url.Parse lets through, are refused here.
func hostChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._:[]", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidStart reports whether s is a start mode ("" means StartAttach).
func ValidStart(s string) bool {
	return s == "" || s == StartAttach || s == StartConsumerFrontier || s == StartOldest
}

// maxSealedPassword bounds the stored sealed form (a password is ≤ 72 bytes; sealed, ≤ 140).
const maxSealedPassword = 1024

func remoteKey(parent, id string) []byte { return []byte(prefixRemote + parent + "\x00" + id) }

// checkRemoteLink validates a stored remote link's fields (deterministic).
func checkRemoteLink(l RemoteLink, parentPartitions int) (Result, bool) {
	id, err := "", error(nil)
	if len(l.URLs) > 0 {
		id, err = RemoteID(l.URLs[0], l.Topic)
	}
	switch {
	case len(l.URLs) == 0 || err != nil:
		return invalid("remote link: bad target urls"), false
	case l.ID != id:
		return invalid("remote link id %q does not match its target %q", l.ID, id), false
	case !ValidTopicName(l.Topic):
		return invalid("remote link: bad target topic %q", l.Topic), false
	case l.AttachEpoch == "":
		return invalid("remote link: missing epoch"), false
	case l.DelayMs < 0 || l.DelayMs > MaxDelayMs:
		return invalid("remote link: delay_ms %d outside 0…%d", l.DelayMs, MaxDelayMs), false
	case len(l.PasswordSealed) > maxSealedPassword:
		return invalid("remote link: sealed password over %d bytes", maxSealedPassword), false
	case l.Start == "" || !ValidStart(l.Start):
		return invalid("remote link: bad start %q", l.Start), false
	case len(l.AttachOffsets) > parentPartitions:
		return invalid("remote link: %d attach offsets for %d parent partitions", len(l.AttachOffsets), parentPartitions), false
	case slices.ContainsFunc(l.AttachOffsets, func(o int64) bool { return o < 0 }):
		return invalid("remote link: negative attach offset"), false
	}
	return Result{}, true
}

type attachRemoteCmd struct {
	Link RemoteLink `json:"link"`
}

// resealRemoteCmd replaces the plaintext password an older version stored for a link with
// its sealed form (op 22).
type resealRemoteCmd struct {
	Parent         string `json:"parent"`
	ID             string `json:"id"`
	Epoch          string `json:"epoch"`
	PasswordSealed string `json:"password_sealed"`
}

type detachRemoteCmd struct {
	Parent string `json:"parent"`
	ID     string `json:"id"`
}

// attachRemote is op 20: store a remote link under r/<parent>\x00<id> and list its ref on the
// parent. Invariants: the parent exists and is not a child (depth 1), ≤ MaxChildren children
// local and remote together, the parent's retention covers a delay, one link per id. The same
// epoch again is an idempotent success.
func (x *txn) attachRemote(c *attachRemoteCmd) Result {
	l := c.Link
	parent, ok := x.topic(l.Parent)
	if !ok {
		return notFound("parent topic %q", l.Parent)
	}
	if r, ok := checkRemoteLink(l, parent.Partitions); !ok {
		return r
	}
	if i := slices.IndexFunc(parent.RemoteLinks, func(r RemoteRef) bool { return r.ID == l.ID }); i >= 0 {
		if parent.RemoteLinks[i].Epoch == l.AttachEpoch {
			return Result{Outcome: OutcomeOK, Topic: parent}
		}
		return refused("%q already has the remote child %s", parent.Name, l.ID)
	}
	switch {
	case parent.Parent != "" || parent.Role == RoleChild:
		return refused("%q is a child; fan-out is one level deep", parent.Name)
	case len(parent.Children)+len(parent.RemoteLinks) >= MaxChildren:
		return refused("%q already has %d children", parent.Name, MaxChildren)
	case !retentionCoversDelay(parent.RetentionMs, l.DelayMs):
		return refused("%q: retention_ms %d below delay_ms %d + 1 h", parent.Name, parent.RetentionMs, l.DelayMs)
	}
	l.AttachOffsets = slices.Clone(l.AttachOffsets)
	x.put(remoteKey(parent.Name, l.ID), l)
	parent.RemoteLinks = append(slices.Clone(parent.RemoteLinks), RemoteRef{ID: l.ID, Epoch: l.AttachEpoch})
	x.putTopic(parent)
	x.ev.Topic, x.ev.Incarnation, x.ev.Parent = l.ID, parent.Incarnation, parent.Name
	return Result{Outcome: OutcomeOK, Topic: parent}
}

// detachRemote is op 21: delete the remote link and its ref on the parent.
func (x *txn) detachRemote(c *detachRemoteCmd) Result {
	parent, ok := x.topic(c.Parent)
	if !ok {
		return notFound("parent topic %q", c.Parent)
	}
	i := slices.IndexFunc(parent.RemoteLinks, func(r RemoteRef) bool { return r.ID == c.ID })
	if i < 0 {
		return notFound("%q has no remote child %s", parent.Name, c.ID)
	}
	x.del(remoteKey(parent.Name, c.ID))
	parent.RemoteLinks = slices.Delete(slices.Clone(parent.RemoteLinks), i, i+1)
	if len(parent.RemoteLinks) == 0 {
		parent.RemoteLinks = nil
	}
	x.putTopic(parent)
	x.ev.Topic, x.ev.Incarnation, x.ev.Parent = c.ID, parent.Incarnation, parent.Name
	return Result{Outcome: OutcomeOK, Topic: parent}
}

// resealRemote is op 22: the link (parent, id) of attach epoch Epoch that still holds a
// plaintext password gets PasswordSealed instead, and the plaintext is dropped. A link that
// is gone, of another epoch or already sealed is left as it is (OK: every node may propose
// the migration at start, the first one wins).
func (x *txn) resealRemote(c *resealRemoteCmd) Result {
	switch {
	case c.PasswordSealed == "" || len(c.PasswordSealed) > maxSealedPassword:
		return invalid("reseal of %s: sealed password of %d bytes", c.ID, len(c.PasswordSealed))
	}
	var l RemoteLink
	if !x.get(remoteKey(c.Parent, c.ID), &l) || l.AttachEpoch != c.Epoch || l.Password == "" {
		return Result{Outcome: OutcomeOK}
	}
	l.Password, l.PasswordSealed = "", c.PasswordSealed
	x.put(remoteKey(c.Parent, c.ID), l)
	return Result{Outcome: OutcomeOK}
}
