package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/fanout"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/replica"
	"narad.dev/broker/internal/service"
	"narad.dev/broker/internal/wal"
)

// fakePeers records node-RPC calls and answers from canned functions.
type fakePeers struct {
	mu        sync.Mutex
	consumes  []fakeConsume
	acks      [][]service.AckEntry
	onConsume func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error)
	onAck     func(addr string, entries []service.AckEntry) ([]error, error)
	onStats   func(addr string, p int) (service.PartitionStats, error)
	onCommit  func(ctx context.Context, addr string, p int, recs []wal.Record) error
}

type fakeConsume struct {
	addr      string
	req       service.ConsumeRequest
	localOnly bool
}

func (f *fakePeers) Consume(ctx context.Context, addr, topic string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
	f.mu.Lock()
	f.consumes = append(f.consumes, fakeConsume{addr, req, localOnly})
	on := f.onConsume
	f.mu.Unlock()
	if on == nil {
		return nil, nil
	}
	return on(addr, req, localOnly)
}

func (f *fakePeers) Ack(ctx context.Context, addr, topic string, entries []service.AckEntry) ([]error, error) {
	f.mu.Lock()
	f.acks = append(f.acks, entries)
	on := f.onAck
	f.mu.Unlock()
	if on == nil {
		return make([]error, len(entries)), nil
	}
	return on(addr, entries)
}

func (f *fakePeers) PartitionStats(ctx context.Context, addr, topic string, p int) (service.PartitionStats, error) {
	if f.onStats == nil {
		return service.PartitionStats{}, errors.New("unreachable")
	}
	return f.onStats(addr, p)
}

func (f *fakePeers) CreateTopic(context.Context, string, service.CreateTopicRequest) (meta.Topic, uint64, error) {
	return meta.Topic{}, 0, errors.New("not the leader's job in this test")
}
func (f *fakePeers) AlterTopic(context.Context, string, string, service.AlterTopicRequest) (meta.Topic, uint64, error) {
	return meta.Topic{}, 0, errors.New("unused")
}
func (f *fakePeers) DeleteTopic(context.Context, string, string) (uint64, error) {
	return 0, errors.New("unused")
}

func (f *fakePeers) TopicKnown(context.Context, string, string) (bool, error) { return false, nil }

func (f *fakePeers) ExactHighWatermark(context.Context, string, string, int) (int64, error) {
	return 0, errors.New("unreachable")
}

func (f *fakePeers) AttachChild(context.Context, string, string, string, int64) (meta.Topic, uint64, error) {
	return meta.Topic{}, 0, errors.New("unused")
}

func (f *fakePeers) DetachChild(context.Context, string, string, string) (uint64, error) {
	return 0, errors.New("unused")
}

func (f *fakePeers) CommitRemote(ctx context.Context, addr, _, _ string, p int, recs []wal.Record) error {
	f.mu.Lock()
	on := f.onCommit
	f.mu.Unlock()
	if on == nil {
		return errors.New("unreachable")
	}
	return on(ctx, addr, p, recs)
}

func (f *fakePeers) FanoutCursors(context.Context, string, string, int) (fanout.PartitionCursors, error) {
	return fanout.PartitionCursors{}, errors.New("unreachable")
}

func (f *fakePeers) ReplicaSource(string, string, int, string, time.Duration) replica.Source {
	return noPeers{}
}

func (f *fakePeers) ReplicaSegments(string, string, int) replica.SegmentSource { return nil }

func (f *fakePeers) consumeCalls() []fakeConsume {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeConsume(nil), f.consumes...)
}

// twoNodeTopic starts n1 with a second (fake) live member n2 and creates a 3-partition topic:
// placement gives partitions 0 and 2 to n1, partition 1 to n2 (candidates n1, n2).
func twoNodeTopic(t *testing.T, fp Peers) (*testNode, meta.Topic) {
	t.Helper()
	n := startNode(t, t.TempDir(), func(c *Config) { c.Peers = fp })
	if err := n.store.MemberJoin(n.ctx(), meta.Member{ID: "n2", Addr: "127.0.0.1:3", ClusterAddr: "127.0.0.1:4",
		Status: meta.MemberAlive, LastHeartbeat: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	top := n.createTopic(service.CreateTopicRequest{Name: "routed", Partitions: 3})
	if a, _ := n.store.Assignment(top.Name, 1); a.Owner != "n2" {
		t.Fatalf("partition 1 placed on %q, want n2", a.Owner)
	}
	return n, top
}

func TestQueueConsumeProbesRemoteOwnersWhenNothingIsLocal(t *testing.T) {
	fp := &fakePeers{}
	fp.onConsume = func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
		return []service.Message{{Topic: "routed", Partition: 1, Offset: 7, Payload: []byte("remote"), ReceiptHandle: "1:7:9"}}, nil
	}
	n, top := twoNodeTopic(t, fp)
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 5})
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "remote" {
		t.Fatalf("consume = %+v, %v; want the remote owner's message", msgs, err)
	}
	calls := fp.consumeCalls()
	if len(calls) != 1 || calls[0].addr != "127.0.0.1:4" || !calls[0].localOnly || calls[0].req.Wait != 0 || calls[0].req.Max != 5 {
		t.Fatalf("probe calls = %+v; want one non-blocking local_only probe of n2 carrying max 5", calls)
	}
}

func TestAConsumeAnswerStopsAtItsByteBoundAndTellsProbedOwnersWhatItHolds(t *testing.T) {
	fp := &fakePeers{}
	fp.onConsume = func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
		return []service.Message{{Topic: "routed", Partition: 1, Offset: 0, Payload: []byte("remote"), ReceiptHandle: "1:0:9"}}, nil
	}
	n, top := twoNodeTopic(t, fp)
	mib := strings.Repeat("m", 1<<20)
	for range consume.DefaultMaxBytes>>20 + 2 {
		n.mustCommit(top, 0, mib)
	}
	// A full answer from the local partition: no probe, and the records past the bound stay
	// free for the next call.
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1000})
	if err != nil || len(msgs) != consume.DefaultMaxBytes>>20 {
		t.Fatalf("consume = %d messages, %v; want %d of 1 MiB", len(msgs), err, consume.DefaultMaxBytes>>20)
	}
	if calls := fp.consumeCalls(); len(calls) != 0 {
		t.Fatalf("a full answer probed peers: %+v", calls)
	}
	// Two records of 1 MiB left: the probe carries them as what the answer holds.
	msgs, err = n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1000})
	if err != nil || len(msgs) != 3 || string(msgs[2].Payload) != "remote" {
		t.Fatalf("consume = %d messages, %v; want the last 2 local ones and the remote one", len(msgs), err)
	}
	calls := fp.consumeCalls()
	if len(calls) != 1 || calls[0].req.Taken != 2<<20 || calls[0].req.Max != 998 {
		t.Fatalf("probe calls = %+v; want one carrying max 998 and 2 MiB taken", calls)
	}
	// An owner asked on behalf of a partly full answer adds only what fits.
	for range 3 {
		n.mustCommit(top, 0, mib)
	}
	msgs, err = n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1000, LocalOnly: true,
		Taken: consume.DefaultMaxBytes - 2<<20})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("probe of a partly full answer = %d messages, %v; want the 2 that fit", len(msgs), err)
	}
}

func TestLocalMessagesAreServedWithoutAskingRemoteOwners(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	if _, err := n.commit(top, 0, "here"); err != nil {
		t.Fatal(err)
	}
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 || string(msgs[0].Payload) != "here" {
		t.Fatalf("consume = %+v, %v", msgs, err)
	}
	if calls := fp.consumeCalls(); len(calls) != 0 {
		t.Fatalf("a consume satisfied locally probed peers: %+v", calls)
	}
}

func TestParkedConsumeWakesOnARemoteNoticeNotOnATimer(t *testing.T) {
	old := reprobeInterval
	reprobeInterval = time.Hour // only a notice can wake the park now
	t.Cleanup(func() { reprobeInterval = old })

	var ready sync.Once
	armed := make(chan struct{})
	var mu sync.Mutex
	serve := false
	fp := &fakePeers{}
	fp.onConsume = func(addr string, req service.ConsumeRequest, localOnly bool) ([]service.Message, error) {
		mu.Lock()
		defer mu.Unlock()
		if !serve {
			ready.Do(func() { close(armed) })
			return nil, nil
		}
		return []service.Message{{Topic: "routed", Partition: 1, Offset: 0, Payload: []byte("woken"), ReceiptHandle: "1:0:1"}}, nil
	}
	n, top := twoNodeTopic(t, fp)
	done := make(chan []service.Message, 1)
	go func() {
		msgs, _ := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 20 * time.Second})
		done <- msgs
	}()
	<-armed
	waitGoroutine(t, "select", "park")
	mu.Lock()
	serve = true
	mu.Unlock()
	n.e.RemoteNotice(top.Name, 1)
	select {
	case msgs := <-done:
		if len(msgs) != 1 || string(msgs[0].Payload) != "woken" {
			t.Fatalf("woken consume returned %+v", msgs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a remote notice did not wake the parked long-poll")
	}
}

func TestPinnedConsumeOfARemotePartitionIsForwardedWithItsWait(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	_, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 1, Offset: -1, Max: 2, Wait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	calls := fp.consumeCalls()
	if len(calls) != 1 || calls[0].req.Partition != 1 || calls[0].req.Wait != 3*time.Second || calls[0].localOnly {
		t.Fatalf("forwarded calls = %+v; want one pinned call to n2 with the client's wait", calls)
	}
}

func TestPinnedAndReplayReadsOfADeadOwnerAnswerOwnerDown(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	if err := n.store.MemberDead(n.ctx(), "n2"); err != nil {
		t.Fatal(err)
	}
	for _, req := range []service.ConsumeRequest{
		{Partition: 1, Offset: -1, Max: 1},
		{Partition: 1, Offset: 0, Max: 1},
	} {
		if _, err := n.e.Consume(n.ctx(), top, req); !errors.Is(err, errcode.ErrOwnerDown) {
			t.Fatalf("consume %+v of a dead owner's partition: %v, want ErrOwnerDown", req, err)
		}
	}
	// An unpinned consume never fails because one owner is down: it serves what is live.
	if _, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1}); err != nil {
		t.Fatalf("queue consume with a dead owner: %v", err)
	}
	if calls := fp.consumeCalls(); len(calls) != 0 {
		t.Fatalf("a dead owner was asked: %+v", calls)
	}
}

func TestAckBatchIsSplitByOwnerAndKeepsRequestOrder(t *testing.T) {
	fp := &fakePeers{}
	fp.onAck = func(addr string, entries []service.AckEntry) ([]error, error) {
		out := make([]error, len(entries))
		out[1] = errcode.ErrStale
		return out, nil
	}
	n, top := twoNodeTopic(t, fp)
	if _, err := n.commit(top, 0, "local"); err != nil {
		t.Fatal(err)
	}
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 0, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("reserve local: %+v %v", msgs, err)
	}
	entries := []service.AckEntry{
		{Partition: 1, Offset: 3, Nonce: 1},
		ackEntry(t, msgs[0], service.OpAck),
		{Partition: 1, Offset: 4, Nonce: 2},
	}
	errs := n.e.Ack(n.ctx(), top, entries)
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], errcode.ErrStale) {
		t.Fatalf("results = %v; want nil, nil (local ack), stale (remote second entry)", errs)
	}
	if len(fp.acks) != 1 || len(fp.acks[0]) != 2 || fp.acks[0][0].Offset != 3 || fp.acks[0][1].Offset != 4 {
		t.Fatalf("remote ack calls = %+v; want one call with offsets 3 and 4", fp.acks)
	}
}

func TestAckOfADeadOwnersPartitionAnswersUnavailable(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	if err := n.store.MemberDead(n.ctx(), "n2"); err != nil {
		t.Fatal(err)
	}
	errs := n.e.Ack(n.ctx(), top, []service.AckEntry{{Partition: 1, Offset: 0, Nonce: 1}})
	if !errors.Is(errs[0], errcode.ErrUnavailable) || len(fp.acks) != 0 {
		t.Fatalf("ack of a dead owner's partition: %v (calls %d)", errs[0], len(fp.acks))
	}
}

func TestDescribeMarksUnreachableOwnersUnavailableAndFillsReachableOnes(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	st := n.e.PartitionStats(n.ctx(), top, -1)
	if len(st) != 3 || st[1].OwnerNode != "n2" || st[1].Available || !st[0].Available {
		t.Fatalf("stats with n2 unreachable: %+v", st)
	}
	fp.onStats = func(addr string, p int) (service.PartitionStats, error) {
		return service.PartitionStats{Available: true, HighWatermark: 42, NextOffset: 42}, nil
	}
	st = n.e.PartitionStats(n.ctx(), top, -1)
	if !st[1].Available || st[1].HighWatermark != 42 || st[1].Index != 1 || st[1].OwnerNode != "n2" {
		t.Fatalf("stats with n2 reachable: %+v", st[1])
	}
}

func TestKeyedProduceSkipsPartitionsWhoseOwnerIsDead(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	if err := n.store.MemberDead(n.ctx(), "n2"); err != nil {
		t.Fatal(err)
	}
	// Find a key that hashes to partition 1 (n2's).
	var key string
	for i := 0; ; i++ {
		key = string(rune('a'+i%26)) + string(rune('a'+i/26))
		if keyPartition(key, top.Partitions) == 1 { // the hash alone, before dead owners are skipped
			break
		}
	}
	if got := n.e.pickPartition(top, service.ProduceRecord{Key: key, Partition: -1}); got != 2 {
		t.Fatalf("key %q hashing to dead n2's partition 1 went to %d, want the next live partition 2", key, got)
	}
	if got := n.e.pickPartition(top, service.ProduceRecord{Partition: 1}); got != 1 {
		t.Fatalf("a pinned produce must keep its partition, got %d", got)
	}
}

func TestCommitsAndReleasesNotifySubscribedWatchers(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	top := n.createTopic(service.CreateTopicRequest{Name: "watched", Partitions: 3})
	sub := n.e.SubscribeNotices()
	defer sub.Close()
	if _, err := n.commit(top, 2, "x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	refs := sub.Next(ctx)
	if len(refs) != 1 || refs[0].Topic != "watched" || refs[0].Partition != 2 {
		t.Fatalf("notices after a commit = %+v", refs)
	}
	// A nack releases the message: watchers hear about it too.
	msgs, err := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: 2, Offset: -1, Max: 1})
	if err != nil || len(msgs) != 1 {
		t.Fatal(msgs, err)
	}
	if errs := n.e.Ack(n.ctx(), top, []service.AckEntry{ackEntry(t, msgs[0], service.OpNack)}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	refs = sub.Next(ctx)
	if len(refs) != 1 || refs[0].Partition != 2 {
		t.Fatalf("notices after a nack = %+v", refs)
	}
}

func TestCommitWithALocalQueueWaiterParkedDoesNotNotifyPeers(t *testing.T) {
	fp := &fakePeers{}
	n, top := twoNodeTopic(t, fp)
	sub := n.e.SubscribeNotices()
	defer sub.Close()
	done := make(chan []service.Message, 1)
	go func() {
		msgs, _ := n.e.Consume(n.ctx(), top, service.ConsumeRequest{Partition: -1, Offset: -1, Max: 1, Wait: 10 * time.Second})
		done <- msgs
	}()
	waitGoroutine(t, "select", "park")
	if _, err := n.commit(top, 0, "mine"); err != nil {
		t.Fatal(err)
	}
	if msgs := <-done; len(msgs) != 1 {
		t.Fatalf("the parked local waiter got %+v", msgs)
	}
	// mark runs synchronously inside the commit: had it notified, the set would hold it now.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if refs := sub.Next(ctx); len(refs) != 0 {
		t.Fatalf("peers were notified of a commit a parked local waiter takes: %+v", refs)
	}
	// With nobody parked here, the same commit is announced to peers.
	if _, err := n.commit(top, 0, "theirs"); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if refs := sub.Next(ctx2); len(refs) != 1 || refs[0].Partition != 0 {
		t.Fatalf("notices with no local waiter = %+v", refs)
	}
}

func TestAttachFailsWith503AndLeavesNoLinkWhenAParentOwnerCannotBeAsked(t *testing.T) {
	fp := &fakePeers{} // ExactHighWatermark: "unreachable"
	n, top := twoNodeTopic(t, fp)
	child := n.createTopic(service.CreateTopicRequest{Name: "routed-child", Partitions: 3})
	_, err := n.e.AttachChild(n.ctx(), top.Name, child.Name, 0)
	if !errors.Is(err, errcode.ErrUnavailable) {
		t.Fatalf("attach with n2 unreachable: %v, want ErrUnavailable (503)", err)
	}
	if c, _ := n.e.Topic(child.Name); c.Parent != "" {
		t.Fatalf("a failed attach left a link: %+v", c)
	}
	if p, _ := n.e.Topic(top.Name); len(p.Children) != 0 {
		t.Fatalf("a failed attach left the parent with children %v", p.Children)
	}
}

func TestAttachRecordsEveryParentPartitionsCommittedHighWatermark(t *testing.T) {
	fpHWM := int64(7)
	n, top := twoNodeTopic(t, &hwmPeers{fakePeers: &fakePeers{}, hwm: fpHWM})
	n.mustCommit(top, 0, "a", "b")
	n.mustCommit(top, 2, "c")
	child := n.createTopic(service.CreateTopicRequest{Name: "routed-child", Partitions: 3})
	if _, err := n.e.AttachChild(n.ctx(), top.Name, child.Name, 0); err != nil {
		t.Fatal(err)
	}
	c, _ := n.e.Topic(child.Name)
	if want := []int64{2, fpHWM, 1}; !slices.Equal(c.AttachOffsets, want) || c.AttachEpoch == "" || c.Parent != top.Name {
		t.Fatalf("attach recorded offsets %v epoch %q parent %q; want %v, an epoch, %s", c.AttachOffsets, c.AttachEpoch, c.Parent, want, top.Name)
	}
}

// hwmPeers answers exact HWM reads of remote partitions with a fixed value.
type hwmPeers struct {
	*fakePeers
	hwm int64
}

func (h *hwmPeers) ExactHighWatermark(context.Context, string, string, int) (int64, error) {
	return h.hwm, nil
}
