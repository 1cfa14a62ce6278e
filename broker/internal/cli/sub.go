package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
	"narad.dev/broker/internal/clock"
)

const (
	// subWait is the long-poll budget of each queue consume (the server's default ceiling).
	subWait = 10 * time.Second
	// ackTries bounds the attempts per ack; a 410 ends them at once (docs/internals/http-api.md §3).
	ackTries = 5
	// ackTimeout bounds one ack attempt; acks outlive Ctrl-C so a printed message is settled.
	ackTimeout = 10 * time.Second
	// peekBatch is the max_messages of each replay read of `sub --peek` and `replay`.
	peekBatch = 100
)

func (a *app) subCmd() *cobra.Command {
	var (
		partition  int
		from       int64
		raw, noAck bool
		peek       bool
	)
	cmd := &cobra.Command{
		Use:   "sub <topic>",
		Short: "Consume messages (queue consumer; --peek tails without reserving)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var part *int
			if f.Changed("partition") {
				part = &partition
			}
			if f.Changed("from") && (!peek || part == nil) {
				return errf("--from needs --peek and --partition")
			}
			c, err := a.newClient(cmd, 2)
			if err != nil {
				return err
			}
			p := a.newPrinter(cmd.OutOrStdout(), raw)
			if peek {
				var start *int64
				if f.Changed("from") {
					start = &from
				}
				return a.peek(cmd.Context(), cmd.ErrOrStderr(), c, args[0], part, start, p)
			}
			return a.subscribe(cmd.Context(), cmd.ErrOrStderr(), c, args[0], part, !noAck, p)
		},
	}
	f := cmd.Flags()
	f.IntVar(&partition, "partition", 0, "consume only this partition")
	f.BoolVar(&raw, "raw", false, "print only the payload bytes")
	f.BoolVar(&noAck, "no-ack", false, "do not ack (messages come back after the visibility timeout)")
	f.BoolVar(&peek, "peek", false, "read-only tail from the current end of each partition; never reserves")
	f.Int64Var(&from, "from", 0, "with --peek and --partition: start at this offset")
	return cmd
}

// subscribe is the queue consumer loop: consume (long poll), print, ack with retry. It ends
// cleanly (nil) when ctx is cancelled.
func (a *app) subscribe(ctx context.Context, stderr io.Writer, c *client.Client, topic string,
	part *int, ack bool, p *messagePrinter) error {
	failures := 0
	for {
		msgs, err := c.Consume(ctx, topic, client.ConsumeOptions{Wait: subWait, Partition: part})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !retryableErr(err) {
				return err
			}
			failures++
			fmt.Fprintf(stderr, "narad: consume: %v (retrying)\n", err)
			if clock.Sleep(ctx, a.ackBackoff(min(failures+1, ackTries))) != nil {
				return nil
			}
			continue
		}
		failures = 0
		for _, m := range msgs {
			if err := p.print(m); err != nil {
				return err
			}
			if !ack || m.ReceiptHandle == "" {
				continue
			}
			if err := a.ackWithRetry(ctx, c, topic, m.ReceiptHandle); err != nil {
				if fatalAPIError(err) && !client.IsStatus(err, http.StatusGone) {
					return fmt.Errorf("ack p%d @%d: %w", m.Partition, m.Offset, err)
				}
				fmt.Fprintf(stderr, "narad: ack p%d @%d: %v (it will be redelivered)\n", m.Partition, m.Offset, err)
			}
		}
	}
}

// ackWithRetry acks handle with up to ackTries attempts. 204 and 410 are final (410: the
// lease lapsed, the message may come again); 5xx, 429 and timeouts are retried after
// ackBackoff; anything else returns at once. Acks use a context that survives ctx's
// cancellation so a printed message is settled during shutdown.
func (a *app) ackWithRetry(ctx context.Context, c *client.Client, topic, handle string) error {
	base := context.WithoutCancel(ctx)
	var err error
	for try := 1; try <= ackTries; try++ {
		if try > 1 && clock.Sleep(base, a.ackBackoff(try)) != nil {
			return err
		}
		actx, cancel := context.WithTimeout(base, ackTimeout)
		err = c.Ack(actx, topic, handle)
		cancel()
		if err == nil || client.IsStatus(err, http.StatusGone) {
			return nil
		}
		if !retryableErr(err) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d tries: %w", ackTries, err)
}

// peek tails partitions with replay reads, starting at each partition's current high
// watermark (or start for the single --partition). It never reserves or acks. On 410 it
// jumps to the partition's oldest offset (or past an unreadable record).
func (a *app) peek(ctx context.Context, stderr io.Writer, c *client.Client, topic string,
	part *int, start *int64, p *messagePrinter) error {
	d, err := c.GetTopic(ctx, topic, part)
	if err != nil {
		return err
	}
	// A cursor whose owner could not be asked has no known high watermark yet; it is
	// positioned on a later round (never at 0, which would replay the whole partition).
	type cursor struct {
		partition  int
		next       int64
		positioned bool
	}
	var cursors []cursor
	for _, s := range d.PartitionStats {
		if part != nil && s.Index != *part {
			continue
		}
		cur := cursor{partition: s.Index, next: s.HighWatermark, positioned: s.Available}
		if start != nil {
			cur.next, cur.positioned = *start, true
		}
		cursors = append(cursors, cur)
	}
	if len(cursors) == 0 {
		return errf("topic %q reported no partitions", topic)
	}
	for {
		progressed := false
		for i := range cursors {
			cur := &cursors[i]
			if !cur.positioned {
				d, err := c.GetTopic(ctx, topic, &cur.partition)
				if ctx.Err() != nil {
					return nil
				}
				if err != nil && !retryableErr(err) {
					return err
				}
				if err != nil || len(d.PartitionStats) == 0 || !d.PartitionStats[0].Available {
					continue
				}
				cur.next, cur.positioned = d.PartitionStats[0].HighWatermark, true
			}
			next, n, err := a.replayStep(ctx, stderr, c, topic, cur.partition, cur.next, -1, p)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if !retryableErr(err) {
					return err
				}
				fmt.Fprintf(stderr, "narad: p%d: %v (retrying)\n", cur.partition, err)
				continue
			}
			if n > 0 || next != cur.next {
				progressed = true
			}
			cur.next = next
		}
		if !progressed && clock.Sleep(ctx, a.pollInterval) != nil {
			return nil
		}
	}
}

// replayStep reads up to peekBatch records of partition from offset next (below end when
// end >= 0), prints them and returns the next offset and how many were printed. On 410 it
// moves next to the partition's oldest offset if next aged out, else one past the
// unreadable record, and says so on stderr. 204 leaves next unchanged.
func (a *app) replayStep(ctx context.Context, stderr io.Writer, c *client.Client, topic string,
	partition int, next, end int64, p *messagePrinter) (int64, int, error) {
	maxN := int64(peekBatch)
	if end >= 0 {
		maxN = min(maxN, end-next)
	}
	msgs, err := c.Consume(ctx, topic, client.ConsumeOptions{Partition: &partition, Offset: &next, Max: int(maxN)})
	if client.IsStatus(err, http.StatusGone) {
		d, derr := c.GetTopic(ctx, topic, &partition)
		if derr != nil {
			return next, 0, derr
		}
		oldest := int64(0)
		if len(d.PartitionStats) > 0 {
			oldest = d.PartitionStats[0].OldestOffset
		}
		if oldest > next {
			fmt.Fprintf(stderr, "narad: p%d: offsets %d..%d aged out, skipping to %d\n", partition, next, oldest-1, oldest)
			return oldest, 0, nil
		}
		fmt.Fprintf(stderr, "narad: p%d: offset %d is unreadable, skipping it\n", partition, next)
		return next + 1, 0, nil
	}
	if err != nil {
		return next, 0, err
	}
	printed := 0
	for _, m := range msgs {
		if m.Offset < next || (end >= 0 && m.Offset >= end) {
			continue
		}
		if err := p.print(m); err != nil {
			return next, printed, err
		}
		printed++
		next = m.Offset + 1
	}
	if len(msgs) > 0 && printed == 0 {
		return next, 0, errors.New("replay answered records outside the requested range")
	}
	return next, printed, nil
}
