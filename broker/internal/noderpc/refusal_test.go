package noderpc

import (
	"errors"
	"testing"

	"narad.dev/broker/internal/errcode"
)

// The refusals the service decides itself keep the status and text they had as literals.
func TestRefusalsKeepTheirStatusAndText(t *testing.T) {
	cases := []struct {
		plane  *errcode.Plane
		err    error
		status int32
		reason errcode.Reason
		msg    string
	}{
		{errcode.Consume, errUnknownTopic, 404, "not_found", "unknown topic"},
		{errcode.Data, errUnknownTopic, 404, "not_found", "unknown topic"},
		{errcode.Data, errPartitionRange, 400, "invalid", "partition out of range"},
		{errcode.Data, errNotTheOwner, 421, "not_owner", "not the owner"},
		{errcode.Leader, errNotTheLeader, 421, "not_leader", "not the leader"},
		{errcode.Leader, errcode.ErrNotLeader, 421, "not_leader", "not the raft leader"},
		{errcode.Leader, errcode.Sub("undecodable attach request", errcode.ErrInvalid), 400, "invalid", "undecodable attach request"},
	}
	for _, c := range cases {
		st, reason, msg := c.plane.Reply(c.err)
		if st != c.status || reason != c.reason || msg != c.msg {
			t.Errorf("%v → (%d, %q, %q), want (%d, %q, %q)", c.err, st, reason, msg, c.status, c.reason, c.msg)
		}
	}
	if rep := refusedTopicWrite(errcode.Sub("undecodable create request: x", errcode.ErrInvalid)); rep.Status != 400 ||
		rep.Error != "undecodable create request: x" || rep.AppliedIndex != 0 || rep.LeaderHint != "" {
		t.Errorf("refused topic write %+v", rep)
	}
	// A caller reads each back as the sentinel it read from the literal status.
	st, reason, msg := errcode.Data.Reply(errNotTheOwner)
	if err := errcode.Data.Error(st, string(reason), msg); !errors.Is(err, errcode.ErrNotOwner) {
		t.Errorf("not the owner read as %v", err)
	}
}
