package engine

import (
	"context"
	"errors"
	"time"

	"narad.dev/broker/internal/consume"
	"narad.dev/broker/internal/errcode"
	"narad.dev/broker/internal/meta"
	"narad.dev/broker/internal/service"
)

// requeueTimeout bounds the nacks Requeue sends to other nodes.
const requeueTimeout = 5 * time.Second

// Requeue ends the leases of msgs, all or part of one Consume's answer that cannot reach its
// consumer any more (the caller gave up before it was written, or its write failed), as a
// nack would: the messages are delivered again at once instead of after their visibility
// timeout (docs/internals/consume-and-leases.md §5). Messages owned by another node are
// nacked there. A lease that ended meanwhile is left alone, and other failures are only
// logged: those leases expire as usual. Replayed messages hold no lease and are skipped.
func (e *Engine) Requeue(t meta.Topic, msgs []service.Message) {
	entries := make([]service.AckEntry, 0, len(msgs))
	for _, m := range msgs {
		if m.ReceiptHandle == "" {
			continue
		}
		h, err := consume.ParseHandle(m.ReceiptHandle)
		if err != nil {
			continue
		}
		entries = append(entries, service.AckEntry{Partition: h.Partition, Offset: h.Offset, Nonce: h.Nonce, Op: service.OpNack})
	}
	if len(entries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), requeueTimeout)
	defer cancel()
	for i, err := range e.Ack(ctx, t, entries) {
		if err != nil && !errors.Is(err, errcode.ErrStale) {
			e.log.Warn("requeue an undelivered message", "topic", t.Name, "partition", entries[i].Partition,
				"offset", entries[i].Offset, "err", err)
		}
	}
}
