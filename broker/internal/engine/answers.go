package engine

import (
	"context"
	"sync/atomic"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/service"
)

// DefaultMaxInflightAnswerBytes is the node's budget of message bytes held in consume and
// replay answers at once when Config.MaxInflightAnswerBytes is not positive: 32 full answers,
// or thousands of typical ones (docs/operating.md, Limits).
const DefaultMaxInflightAnswerBytes = 256 << 20

// minAnswerGrant is the least room a read of messages starts with: the largest message (a
// 1 MiB payload and a 4 KiB key) fits, so the rule that an answer holds at least one message
// never takes it past its grant.
const minAnswerGrant = 1<<20 + 4<<10

// errAnswersBusy is the refusal of a consume or replay that found messages while the
// node's answer budget was spent: 503 with Retry-After, retried by clients.
var errAnswersBusy = errcode.Sub("too many consume answer bytes in flight on this node; retry after a moment", errcode.ErrBusy)

// answerBudget bounds the key and payload bytes this node holds in consume and replay
// answers: the messages a consume or replay has read and not yet answered, here or for a
// peer's probe (docs/internals/consume-and-leases.md §4). A queue consume takes each message's
// bytes as it reads it (take); a replay, a remote probe and the admission of a forwarded
// pinned consume take a grant first, keep what their messages hold and give the rest back
// at once. The answer's holder gives what it holds back (Engine.ReleaseAnswer) once the
// answer is written. A long-poll holds nothing while it waits. Safe for concurrent use.
type answerBudget struct {
	limit int64
	used  atomic.Int64
}

func newAnswerBudget(limit int64) *answerBudget {
	if limit <= 0 {
		limit = DefaultMaxInflightAnswerBytes
	}
	return &answerBudget{limit: limit}
}

// grant takes up to want bytes (at most consume.DefaultMaxBytes): all of it if free, else
// what is free if that is at least minAnswerGrant (or want, when want is smaller); 0 when
// the budget cannot give that much.
func (b *answerBudget) grant(want int) int { return b.grantOf(want, 1) }

// probeShare divides the free budget among concurrent remote probes: a probe's grant is at
// most this fraction of what is free (but always room for one message), so probes in flight
// for small messages cannot hold the whole budget and starve the node's own reads.
const probeShare = 32

// grantShare is grant for a remote probe: at most a probeShare-th of what is free, but at
// least the least grant of want.
func (b *answerBudget) grantShare(want int) int { return b.grantOf(want, probeShare) }

// grantOf takes min(want, free/share), raised to the least grant (min(want, minAnswerGrant)),
// if that much is free; else 0.
func (b *answerBudget) grantOf(want int, share int64) int {
	want = min(want, consume.DefaultMaxBytes)
	if want <= 0 {
		return 0
	}
	least := int64(min(want, minAnswerGrant))
	for {
		cur := b.used.Load()
		free := b.limit - cur
		n := min(int64(want), max(least, free/share))
		if n > free {
			return 0
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			return int(n)
		}
	}
}

// settle ends a read under a grant of granted bytes whose messages hold held bytes: the
// difference goes back (or, for messages whose size the read bounded differently, is
// taken). held stays taken until release.
func (b *answerBudget) settle(granted, held int) {
	if d := int64(held - granted); d != 0 {
		b.add(d)
	}
}

// take takes exactly n bytes if they fit.
func (b *answerBudget) take(n int) bool {
	for {
		cur := b.used.Load()
		if int64(n) > b.limit-cur {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// release gives back n bytes held by an answer.
func (b *answerBudget) release(n int) {
	if n > 0 {
		b.add(-int64(n))
	}
}

func (b *answerBudget) add(d int64) {
	if b.used.Add(d) < 0 {
		panic("engine: answer budget released more than was taken")
	}
}

// inUse is the number of bytes taken now.
func (b *answerBudget) inUse() int64 { return b.used.Load() }

// answerGrantWait is the least time a read waits for the answer budget to free room before
// it is refused with errAnswersBusy; a long-poll waits until its own deadline if that is
// later. Grants are held for microseconds (a remote probe's for a node RPC), so a budget
// that stays spent is held by answers being written to slow readers.
const answerGrantWait = 200 * time.Millisecond

// The pauses between tries for room in a spent budget: doubling from the first to the last.
const (
	minAnswerPause = 100 * time.Microsecond
	maxAnswerPause = 20 * time.Millisecond
)

// messageCeiling is the most key and payload bytes one message holds (a 1 MiB payload and a
// 4 KiB key).
const messageCeiling = minAnswerGrant

// takeAnswer takes the answer grant of a read of up to max messages into an answer that
// holds taken bytes already (a replay's, or the admission of a forwarded pinned consume):
// room for max of the largest messages, within the answer bound (consume.DefaultMaxBytes).
// While the budget cannot give it, it retries with a growing pause for answerGrantWait,
// then refuses with errAnswersBusy (ctx ending refuses at once).
func (e *Engine) takeAnswer(ctx context.Context, max, taken int) (int, error) {
	want := answerRoom(max, taken)
	if want <= 0 {
		return 0, nil
	}
	until := time.Now().Add(answerGrantWait)
	pause := minAnswerPause
	for {
		if g := e.answers.grant(want); g > 0 {
			return g, nil
		}
		if ctx.Err() != nil || !time.Now().Before(until) {
			return 0, errAnswersBusy
		}
		time.Sleep(pause)
		pause = min(2*pause, maxAnswerPause)
	}
}

// answerRoom is the most bytes a read of up to n messages can add to an answer that holds
// taken bytes already: n of the largest messages, within the answer bound.
func answerRoom(n, taken int) int {
	room := consume.DefaultMaxBytes - taken
	if n < room/messageCeiling+1 { // n × messageCeiling < room, without overflow
		room = n * messageCeiling
	}
	return room
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ReleaseAnswer gives back the answer budget msgs hold: the caller of Consume calls it once
// with everything Consume returned, after the answer is written (or dropped).
func (e *Engine) ReleaseAnswer(msgs []service.Message) { e.answers.release(messageBytes(msgs)) }
