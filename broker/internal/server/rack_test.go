package server

import (
	"context"
	"testing"
	"time"

	"narad.dev/broker/internal/testwait"
)

// A node started with --rack registers it in its member record: GET /v1/cluster/members
// shows it (docs/replication.md, Racks).
func TestRackFlagShowsInTheMemberRecord(t *testing.T) {
	n := startRun(t, clusterConfig(t, "n1", "127.0.0.31", "", "--rack", "zone-a"))
	testwait.For(t, 30*time.Second, "n1 listed with rack zone-a", func() bool {
		l, err := n.c.ClusterMembers(context.Background())
		return err == nil && len(l.Members) == 1 && l.Members[0].Rack == "zone-a"
	})
}
