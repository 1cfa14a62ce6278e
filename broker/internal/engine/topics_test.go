package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/faults"
	plog "narad.dev/broker/internal/log"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

func TestTopicDeletePurgesDataAndMetricSeries(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "doomed", Partitions: 3})
	keep := n.createTopic(service.CreateTopicRequest{Name: "kept", Partitions: 3})
	for _, tp := range []struct {
		name string
		p    int
	}{{top.Name, 0}, {keep.Name, 0}} {
		tt := n.topic(tp.name)
		n.mustCommit(tt, tp.p, "x")
		if _, err := n.e.Consume(n.ctx(), tt, service.ConsumeRequest{Partition: tp.p, Offset: -1, Max: 1}); err != nil {
			t.Fatal(err)
		}
	}
	n.e.pollGauges()
	if len(seriesWithLabel(t, n.m, "topic", top.Name)) == 0 {
		t.Fatal("no metric series for the topic before the delete: the test would prove nothing")
	}
	if !fileExists(n.partDir(top.Name, 0)) {
		t.Fatal("partition dir missing before the delete")
	}

	if err := n.e.DeleteTopic(n.ctx(), top.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool { return isGone(n.topicDir(top.Name)) }, "topic dir purged")
	eventually(t, 10*time.Second, func() bool { return len(seriesWithLabel(t, n.m, "topic", top.Name)) == 0 },
		"series of %s deleted (left: %v)", top.Name, seriesWithLabel(t, n.m, "topic", top.Name))
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("the deleted topic's log is still registered open")
	}
	// Another topic's data and series are untouched.
	if !fileExists(n.partDir(keep.Name, 0)) || len(seriesWithLabel(t, n.m, "topic", keep.Name)) == 0 {
		t.Fatal("deleting one topic removed another topic's data or series")
	}
	if msgs := n.replay(keep, 0); len(msgs) != 1 {
		t.Fatalf("kept topic replays %d records, want 1", len(msgs))
	}
}

func TestRecreatedTopicGetsFreshIncarnationAndNoOldData(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	old := n.createTopic(service.CreateTopicRequest{Name: "again", Partitions: 3})
	n.mustCommit(old, 0, "old-0", "old-1")
	if err := n.e.DeleteTopic(n.ctx(), old.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool { return isGone(n.topicDir(old.Name)) }, "old data purged")

	fresh := n.createTopic(service.CreateTopicRequest{Name: "again", Partitions: 3})
	if fresh.Incarnation == old.Incarnation || len(fresh.Incarnation) != 16 {
		t.Fatalf("recreate reused or malformed the incarnation: old %q new %q", old.Incarnation, fresh.Incarnation)
	}
	if msgs := n.replayAll(fresh); len(msgs) != 0 {
		t.Fatalf("recreated topic replays old records: %+v", msgs)
	}
	if msgs, err := n.e.Consume(n.ctx(), fresh, queueReq(0, 10)); err != nil || len(msgs) != 0 {
		t.Fatalf("recreated topic delivers %+v (err %v)", msgs, err)
	}
	if first := n.mustCommit(fresh, 0, "new"); first != 0 {
		t.Fatalf("first offset of the recreated topic = %d, want 0", first)
	}
	marker, err := os.ReadFile(filepath.Join(n.topicDir(fresh.Name), ".incarnation"))
	if err != nil || strings.TrimSpace(string(marker)) != fresh.Incarnation {
		t.Fatalf("incarnation marker %q (err %v), want %q", marker, err, fresh.Incarnation)
	}
}

func TestRecordsOfADeletedIncarnationNeverReachTheRecreatedTopic(t *testing.T) {
	resetFaults(t)
	n := startNode(t, t.TempDir(), nil)
	old := n.createTopic(service.CreateTopicRequest{Name: "pc12", Partitions: 3})
	// Commits fail: accepted records stay in the ingress WAL.
	faults.Set(plog.FaultVerify, nil)
	n.produce(old, service.ProduceRecord{Partition: 0, Payload: []byte("old")}, service.ProduceRecord{Partition: 1, Payload: []byte("old")})
	eventually(t, 10*time.Second, func() bool {
		return counterValue(t, n.m, "narad_errors_total", map[string]string{"component": "messaging", "kind": "append"}) > 0
	}, "a failed commit attempt")

	if err := n.e.DeleteTopic(n.ctx(), old.Name); err != nil {
		t.Fatal(err)
	}
	fresh := n.createTopic(service.CreateTopicRequest{Name: "pc12", Partitions: 3})
	faults.Clear(plog.FaultVerify)
	n.produce(fresh, service.ProduceRecord{Partition: 0, Payload: []byte("new")})
	n.waitVisible(fresh, "new")
	// The old records were ahead of "new" in the WAL, so the dispatcher has settled them.
	eventually(t, 10*time.Second, func() bool { return n.e.Undispatched() == 0 }, "ingress backlog drained")
	for _, m := range n.replayAll(fresh) {
		if string(m.Payload) == "old" {
			t.Fatalf("a record of the deleted incarnation was committed into the new topic at %d@%d", m.Partition, m.Offset)
		}
	}
}

func TestStaleIncarnationDirIsSetAsideNotReused(t *testing.T) {
	dir := t.TempDir()
	const oldInc = "0123456789abcdef"
	// A dir left by a deleted incarnation: marker plus a partition with a file in it.
	leftover := filepath.Join(dir, "topics", "reborn", "p00000")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "topics", "reborn", ".incarnation"), []byte(oldInc+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leftover, "consumer.offset"), []byte("old frontier"), 0o644); err != nil {
		t.Fatal(err)
	}

	n := startNode(t, dir, nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "reborn", Partitions: 3})
	n.mustCommit(top, 0, "fresh")

	stale := filepath.Join(dir, ".stale", "reborn@"+oldInc)
	if b, err := os.ReadFile(filepath.Join(stale, "p00000", "consumer.offset")); err != nil || string(b) != "old frontier" {
		t.Fatalf("old dir not set aside at %s: %q, %v", stale, b, err)
	}
	marker, err := os.ReadFile(filepath.Join(n.topicDir("reborn"), ".incarnation"))
	if err != nil || strings.TrimSpace(string(marker)) != top.Incarnation {
		t.Fatalf("marker %q (err %v), want the new incarnation %q", marker, err, top.Incarnation)
	}
	if fileExists(filepath.Join(n.partDir("reborn", 0), "consumer.offset")) {
		// A fresh shard has not checkpointed yet; an old frontier file here means reuse.
		b, _ := os.ReadFile(filepath.Join(n.partDir("reborn", 0), "consumer.offset"))
		if bytes.Equal(b, []byte("old frontier")) {
			t.Fatal("the new incarnation reused the old incarnation's consumer.offset")
		}
	}
	msgs := n.replay(top, 0)
	if len(msgs) != 1 || string(msgs[0].Payload) != "fresh" {
		t.Fatalf("new incarnation replays %+v", msgs)
	}
}

func TestTopicReadsNeverStaleAfterAlter(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "alter", Partitions: 3, VisibilityTimeoutMs: 30_000})
	// Warm the cached view.
	for i := 0; i < 3; i++ {
		n.topic(top.Name)
		n.e.view.Assignments(top.Name)
	}
	for _, vt := range []int64{1_000, 45_000, 2_500} {
		vt := vt
		if _, err := n.e.AlterTopic(n.ctx(), top.Name, service.AlterTopicRequest{VisibilityTimeoutMs: &vt}); err != nil {
			t.Fatal(err)
		}
		if got := n.topic(top.Name).VisibilityTimeoutMs; got != vt {
			t.Fatalf("Topic() right after the alter returned visibility %d, want %d", got, vt)
		}
	}
	if _, err := n.e.AlterTopic(n.ctx(), top.Name, service.AlterTopicRequest{Partitions: 5}); err != nil {
		t.Fatal(err)
	}
	if parts, ok := n.e.Topology().Partitions(top.Name, top.Incarnation); !ok || parts != 5 {
		t.Fatalf("dispatcher view after growing to 5: %d, %v", parts, ok)
	}
	if !n.e.owns(top.Name, 4) {
		t.Fatal("the new partition's assignment is not visible right after the alter")
	}
	if _, err := n.commit(n.topic(top.Name), 4, "x"); err != nil {
		t.Fatalf("commit into the new partition: %v", err)
	}
}

func TestPartitionStatsNeverOpensAClosedLog(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.IdleLogEviction = time.Minute })
	top := n.createTopic(service.CreateTopicRequest{Name: "idle", Partitions: 3})
	n.mustCommit(top, 0, "a", "b", "c")

	// An open log answers from memory and is not stamped.
	pt := n.e.parts.Peek(top.Name, 0)
	stamp := pt.LastAccess()
	n.clock.Step(time.Second)
	if st := n.e.PartitionStats(n.ctx(), top, 0); len(st) != 1 || st[0].HighWatermark != 3 || !st[0].Available {
		t.Fatalf("stats of the open log: %+v", st)
	}
	if !pt.LastAccess().Equal(stamp) {
		t.Fatal("PartitionStats stamped the open log's access time")
	}

	// Idle eviction closes it (CLEAN hwm).
	n.clock.Step(2 * time.Minute)
	n.e.parts.EvictIdle()
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("idle log not evicted")
	}
	if got := counterValue(t, n.m, "narad_idle_logs_evicted_total", nil); got != 1 {
		t.Fatalf("narad_idle_logs_evicted_total = %v, want 1", got)
	}
	hwmPath := filepath.Join(n.partDir(top.Name, 0), "hwm")
	before, err := os.ReadFile(hwmPath)
	if err != nil || len(before) != 16 || before[11]&1 != 1 {
		t.Fatalf("hwm after close: %x (err %v), want 16 bytes with CLEAN", before, err)
	}

	for i := 0; i < 10; i++ {
		st := n.e.PartitionStats(n.ctx(), top, -1)
		if len(st) != 3 || !st[0].Available || st[0].HighWatermark != 3 || st[0].NextOffset != 3 || st[0].Segments < 1 {
			t.Fatalf("stats of the closed log: %+v", st)
		}
		n.e.pollGauges()
	}
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("PartitionStats or the poller opened the closed log")
	}
	after, err := os.ReadFile(hwmPath)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("hwm file changed from %x to %x: the log was opened (open rewrites CLEAN=0)", before, after)
	}
	if len(n.e.parts.Snapshot()) != 0 {
		t.Fatalf("%d logs open after describing closed ones", len(n.e.parts.Snapshot()))
	}
}

func TestTopicDeleteDuringLongPollDoesNotResurrectItsData(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "polled", Partitions: 3})
	for p := 0; p < top.Partitions; p++ {
		n.replay(top, p) // open the logs so the waiter parks on them
	}
	done := make(chan error, 1)
	go func() {
		_, err := n.e.Consume(n.ctx(), top, queueReq(3*time.Second, 1))
		done <- err
	}()
	waitGoroutine(t, "select", "narad.dev/broker/internal/engine.park")

	if err := n.e.DeleteTopic(n.ctx(), top.Name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not return")
	}
	// The waiter woke (close broadcast or re-probe) around the purge: it must not have
	// reopened the deleted incarnation's logs or recreated its directory.
	deadline := time.Now().Add(5 * time.Second)
	for !isGone(n.topicDir(top.Name)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for p := 0; p < top.Partitions; p++ {
		if n.e.parts.Peek(top.Name, p) != nil {
			t.Errorf("partition %d of the deleted topic is open again", p)
		}
	}
	if !isGone(n.topicDir(top.Name)) {
		entries, _ := os.ReadDir(n.topicDir(top.Name))
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the deleted topic's dir was recreated by the long-poll: %s holds %v", n.topicDir(top.Name), names)
	}
}

func TestIdleEvictionSkipsLogsWithLeasesOut(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.IdleLogEviction = time.Minute })
	top := n.createTopic(service.CreateTopicRequest{Name: "leased", Partitions: 3, VisibilityTimeoutMs: 3_600_000})
	n.mustCommit(top, 0, "m")
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("consume: %v %v", msgs, err)
	}
	n.clock.Step(2 * time.Minute)
	n.e.parts.EvictIdle()
	if n.e.parts.Peek(top.Name, 0) == nil {
		t.Fatal("idle eviction closed a log with a live lease (the lease would turn stale)")
	}
	if errs := n.e.Ack(n.ctx(), top, []service.AckEntry{ackEntry(t, msgs[0], service.OpAck)}); errs[0] != nil {
		t.Fatalf("ack after the skipped eviction: %v", errs[0])
	}
	n.clock.Step(2 * time.Minute)
	n.e.parts.EvictIdle()
	if n.e.parts.Peek(top.Name, 0) != nil {
		t.Fatal("idle log without leases not evicted")
	}
}

func TestCreateTopicWaitsBehindTheCreateGate(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	// A second engine over the same store whose boot has not opened the gate yet.
	e := New(Config{NodeID: "n1", DataDir: t.TempDir()}, n.store, n.in)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.CreateTopic(ctx, service.CreateTopicRequest{Name: "early", Partitions: 3}); !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("create before the gate opened: %v, want ErrUnavailable", err)
	}
	if _, ok := n.store.Topic("early"); ok {
		t.Fatal("a create refused at the gate was proposed anyway")
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.CreateTopic(n.ctx(), service.CreateTopicRequest{Name: "early", Partitions: 3})
		done <- err
	}()
	waitGoroutine(t, "select", "narad.dev/broker/internal/engine.(*Engine).CreateTopic")
	e.OpenCreateGate()
	e.OpenCreateGate() // idempotent
	if err := <-done; err != nil {
		t.Fatalf("create after the gate opened: %v", err)
	}
	if err := e.Ready(); err == nil {
		t.Fatal("Ready() nil before SetReady(true)")
	}
	e.SetReady(true)
	// AppliedCaughtUp is false for the instant an entry is being applied; readiness holds
	// once the replica is quiet.
	eventually(t, 5*time.Second, func() bool { return e.Ready() == nil }, "Ready() on a ready, caught-up node: %v", e.Ready())
	e.BeginShutdown()
	if err := e.Ready(); err == nil || !e.ShuttingDown() {
		t.Fatal("a shutting-down node still reports ready")
	}
}

func TestReplicatedCreateNeedsAsManyMembersAsReplicas(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	_, err := n.e.CreateTopic(n.ctx(), service.CreateTopicRequest{Name: "r3", Partitions: 3, ReplicationFactor: 3})
	if !errors.Is(err, errcode.ErrNotEnoughMembers) || errcode.HTTPStatus(err) != 422 {
		t.Fatalf("R=3 on one node: %v", err)
	}
	if _, ok := n.store.Topic("r3"); ok {
		t.Fatal("a refused replicated create was proposed anyway")
	}
	// R = 1 said out loud is stored exactly as a topic that never heard of replication.
	if _, err := n.e.CreateTopic(n.ctx(), service.CreateTopicRequest{Name: "r1", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := n.store.Topic("r1"); got.ReplicationFactor != 0 || got.RF() != 1 {
		t.Fatalf("stored %+v", got)
	}
	if a, _ := n.store.Assignment("r1", 0); a.Replicas != nil || a.ISR != nil {
		t.Fatalf("R=1 assignment stored with replica lists: %+v", a)
	}
}

// Describe shows a replicated partition's replica set, leader, epoch (0 included) and ISR;
// an unreplicated partition shows none of them.
func TestDescribeShowsTheReplicaFieldsOfAReplicatedPartitionOnly(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	rr := meta.Topic{Name: "rr", Partitions: 3, ReplicationFactor: 2, MinInsyncReplicas: 1, Incarnation: "00112233445566aa",
		Role: meta.RoleStandalone}
	var as []meta.Assignment
	for p := range 3 {
		as = append(as, meta.Assignment{Topic: "rr", Partition: p, Owner: "n1", Replicas: []string{"n1", "n9"},
			ISR: []string{"n1", "n9"}})
	}
	if err := n.store.CreateTopic(n.ctx(), rr, as); err != nil {
		t.Fatal(err)
	}
	plain := n.createTopic(service.CreateTopicRequest{Name: "plain"})
	eventually(t, 5*time.Second, func() bool { _, ok := n.e.view.Topic("rr"); return ok }, "topic rr visible")
	tp, _ := n.e.view.Topic("rr")
	st := n.e.LocalPartitionStats(tp, 0)[0]
	b, _ := json.Marshal(st)
	for _, want := range []string{`"replicas":["n1","n9"]`, `"leader":"n1"`, `"leader_epoch":0`, `"isr":["n1","n9"]`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("replicated partition %s lacks %s", b, want)
		}
	}
	b, _ = json.Marshal(n.e.LocalPartitionStats(plain, 0)[0])
	for _, absent := range []string{"replicas", "leader", "isr"} {
		if strings.Contains(string(b), `"`+absent) {
			t.Fatalf("unreplicated partition %s shows %s", b, absent)
		}
	}
}

// A create that names no replication factor takes --default-replication-factor: 3 on a lone
// node is refused for want of members, while an explicit 1 still creates.
func TestCreateWithoutAReplicationFactorTakesTheClusterDefault(t *testing.T) {
	n := startNode(t, t.TempDir(), func(c *Config) { c.DefaultReplicationFactor = 3 })
	_, err := n.e.CreateTopic(n.ctx(), service.CreateTopicRequest{Name: "d", Partitions: 3})
	if !errors.Is(err, errcode.ErrNotEnoughMembers) {
		t.Fatalf("create under a default of 3 on one node: %v", err)
	}
	if _, err := n.e.CreateTopic(n.ctx(), service.CreateTopicRequest{Name: "one", Partitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatalf("explicit replication factor 1: %v", err)
	}
}
