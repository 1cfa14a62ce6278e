package auth

import (
	"strings"

	"narad.dev/broker/internal/meta"
)

// PatternMatches reports whether a grant pattern matches a topic name (docs/internals/http-api.md §1.3): a
// pattern ending in '*' matches every name starting with the text before it ("*" matches every
// name); any other pattern matches exactly that name. The empty pattern matches nothing.
func PatternMatches(pattern, topic string) bool {
	if pattern == "" {
		return false
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(topic, prefix)
	}
	return pattern == topic
}

// patternCovers reports whether holding have grants at least everything want would: a literal
// covers only itself; "p*" covers any literal or wildcard starting with "p" (rule 3 of
// docs/internals/http-api.md §1.3).
func patternCovers(have, want string) bool {
	if have == "" || want == "" {
		return false
	}
	if prefix, ok := strings.CutSuffix(have, "*"); ok {
		return strings.HasPrefix(want, prefix)
	}
	return have == want
}

// IsAdmin reports whether u is the root admin or holds the admin action. nil is not an admin.
func IsAdmin(u *meta.User) bool {
	if u == nil {
		return false
	}
	if u.Root {
		return true
	}
	for _, g := range u.Grants {
		if g.Action == meta.ActionAdmin {
			return true
		}
	}
	return false
}

// MayLinkRemote reports whether u may attach a remote fan-out child: admins and root only. A
// remote link makes the broker connect to a URL the caller chooses and copies a topic out of
// the cluster, so neither create nor the manage right (ownership) is enough. nil → false.
func MayLinkRemote(u *meta.User) bool { return IsAdmin(u) }

// Allows reports whether u may perform action (produce, consume, create) on topic: admins and
// root may do everything; anyone else needs a grant of that action with a matching pattern.
// The check is name-based, so it answers the same whether or not the topic exists. nil → false.
func Allows(u *meta.User, action, topic string) bool {
	if u == nil {
		return false
	}
	if IsAdmin(u) {
		return true
	}
	for _, g := range u.Grants {
		if g.Action != action {
			continue
		}
		for _, p := range g.Patterns {
			if PatternMatches(p, topic) {
				return true
			}
		}
	}
	return false
}

// CanManage reports whether u holds the manage right on t: it is t's owner, or an admin/root.
// Ownership needs no grant. A topic without owner (made with security off) is managed by
// admins only. nil → false.
func CanManage(u *meta.User, t meta.Topic) bool {
	if u == nil {
		return false
	}
	if IsAdmin(u) {
		return true
	}
	return t.Owner != "" && t.Owner == u.Username
}

// holdsCovering reports whether u holds action with a pattern covering want.
func holdsCovering(u *meta.User, action, want string) bool {
	for _, g := range u.Grants {
		if g.Action != action {
			continue
		}
		for _, p := range g.Patterns {
			if patternCovers(p, want) {
				return true
			}
		}
	}
	return false
}
