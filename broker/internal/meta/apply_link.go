package meta

import (
	"bytes"
	"slices"
)

// attachChild is op 13: link child under parent with the §3.1 invariants (depth 1, one parent
// per child, ≤ MaxChildren children, 0 ≤ delay ≤ 1 year, parent retention covers the delay,
// schema adoption). Re-proposing the same attach (same epoch) is an idempotent success.
func (x *txn) attachChild(c *attachCmd) Result {
	parent, ok := x.topic(c.Parent)
	if !ok {
		return notFound("parent topic %q", c.Parent)
	}
	child, ok := x.topic(c.Child)
	if !ok {
		return notFound("child topic %q", c.Child)
	}
	p, _, r := x.link(parent, child, c.AttachSpec)
	if r.Outcome == OutcomeOK {
		x.ev.Topic, x.ev.Incarnation, x.ev.Parent = child.Name, child.Incarnation, parent.Name
		r.Topic = p
	}
	return r
}

// link checks and writes one attach. It returns both records after the attach.
func (x *txn) link(parent, child Topic, s AttachSpec) (Topic, Topic, Result) {
	switch {
	case parent.Name == child.Name:
		return parent, child, invalid("a topic cannot be its own child")
	case s.Epoch == "":
		return parent, child, invalid("attach of %q: missing epoch", child.Name)
	case s.DelayMs < 0 || s.DelayMs > MaxDelayMs:
		return parent, child, invalid("attach of %q: delay_ms %d outside 0…%d", child.Name, s.DelayMs, MaxDelayMs)
	case len(s.Offsets) > parent.Partitions:
		return parent, child, invalid("attach of %q: %d attach offsets for %d parent partitions", child.Name, len(s.Offsets), parent.Partitions)
	case slices.ContainsFunc(s.Offsets, func(o int64) bool { return o < 0 }):
		return parent, child, invalid("attach of %q: negative attach offset", child.Name)
	case child.Parent == parent.Name && child.AttachEpoch == s.Epoch:
		return parent, child, Result{Outcome: OutcomeOK, Topic: parent, Version: child.SchemaVersion}
	case child.Parent == parent.Name:
		return parent, child, refused("%q is already attached to %q", child.Name, parent.Name)
	case parent.Parent != "" || parent.Role == RoleChild:
		return parent, child, refused("%q is a child; fan-out is one level deep", parent.Name)
	case len(child.Children) > 0 || child.Role == RoleParent || len(child.RemoteLinks) > 0:
		return parent, child, refused("%q is a parent; fan-out is one level deep", child.Name)
	case child.Parent != "":
		return parent, child, refused("%q is already attached to %q", child.Name, child.Parent)
	case len(parent.Children)+len(parent.RemoteLinks) >= MaxChildren:
		return parent, child, refused("%q already has %d children", parent.Name, MaxChildren)
	case !retentionCoversDelay(parent.RetentionMs, s.DelayMs):
		return parent, child, refused("%q: retention_ms %d below delay_ms %d + 1 h", parent.Name, parent.RetentionMs, s.DelayMs)
	}
	ph, ch := x.schemas(parent.Name), x.schemas(child.Name)
	switch {
	case len(ch) == 0:
		for _, sc := range ph { // adopt the parent's full history
			x.writeSchema(Schema{Topic: child.Name, Version: sc.Version, Doc: sc.Doc})
		}
		child.SchemaVersion = parent.SchemaVersion
	case !sameHistory(ph, ch):
		return parent, child, refused("schema history of %q differs from its parent %q", child.Name, parent.Name)
	}
	child.Role, child.Parent, child.AttachEpoch, child.FanoutDelayMs = RoleChild, parent.Name, s.Epoch, s.DelayMs
	child.AttachOffsets = slices.Clone(s.Offsets)
	parent.Role = RoleParent
	parent.Children = append(slices.Clone(parent.Children), child.Name)
	x.putTopic(child)
	x.putTopic(parent)
	return parent, child, Result{Outcome: OutcomeOK, Topic: parent, Version: child.SchemaVersion}
}

// sameHistory reports whether two schema histories hold the same versions and documents.
func sameHistory(a, b []Schema) bool {
	return slices.EqualFunc(a, b, func(x, y Schema) bool {
		return x.Version == y.Version && bytes.Equal(x.Doc, y.Doc)
	})
}

// detachChild is op 14: clear the child's link fields and remove it from the parent's
// children (a parent left without children becomes standalone). The child keeps its data
// and schemas. A child not attached to this parent is not found.
func (x *txn) detachChild(c *detachCmd) Result {
	parent, ok := x.topic(c.Parent)
	if !ok {
		return notFound("parent topic %q", c.Parent)
	}
	child, ok := x.topic(c.Child)
	if !ok {
		return notFound("child topic %q", c.Child)
	}
	if child.Parent != parent.Name {
		return notFound("%q is not attached to %q", child.Name, parent.Name)
	}
	parent = withoutChild(parent, child.Name)
	x.putTopic(unlinked(child))
	x.putTopic(parent)
	x.ev.Topic, x.ev.Incarnation, x.ev.Parent = child.Name, child.Incarnation, parent.Name
	return Result{Outcome: OutcomeOK, Topic: parent}
}
