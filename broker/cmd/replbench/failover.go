package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"narad.dev/broker/client"
)

// maxInflight bounds the produces outstanding at once (a tick with all of them taken is
// skipped and counted).
const maxInflight = 4096

// failoverConfig is the flag set of `replbench failover`.
type failoverConfig struct {
	server   string
	topic    string
	part     int // the partition every record is pinned to
	pid      int
	interval time.Duration
	warmup   time.Duration
	timeout  time.Duration // from the kill to giving up
	grace    time.Duration // answers still collected after the first 202 past the kill
	logPath  string
}

func parseFailover(args []string) (failoverConfig, error) {
	var c failoverConfig
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	fs.StringVar(&c.server, "server", "", "node to produce through (one that does not lead the partition)")
	fs.StringVar(&c.topic, "topic", "", "topic to produce to")
	fs.IntVar(&c.part, "partition", 0, "partition to pin every record to (no reroute to another partition)")
	fs.IntVar(&c.pid, "kill-pid", 0, "process to kill -9 after the warm-up (the partition's leader)")
	fs.DurationVar(&c.interval, "interval", 10*time.Millisecond, "time between produces")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "produce this long before the kill")
	fs.DurationVar(&c.timeout, "timeout", 90*time.Second, "give up this long after the kill")
	fs.DurationVar(&c.grace, "grace", 500*time.Millisecond, "keep collecting answers this long after the first 202 past the kill")
	fs.StringVar(&c.logPath, "log", "", "file for every answer: sent_ms done_ms status (ms since the kill)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.server == "" || c.topic == "":
		return c, errors.New("-server and -topic are required")
	case c.part < 0:
		return c, errors.New("-partition must not be negative")
	case c.pid <= 0:
		return c, errors.New("-kill-pid must be a process id")
	case c.interval <= 0 || c.warmup <= 0 || c.timeout <= 0 || c.grace < 0:
		return c, errors.New("-interval, -warmup and -timeout must be positive")
	}
	return c, nil
}

// answer is one produce's outcome: when it was sent and answered, and its HTTP status (0: no
// answer, a transport error or the timeout).
type answer struct {
	sent, done time.Time
	status     int
}

// failoverResult is what `replbench failover` prints.
type failoverResult struct {
	FailoverMs float64 `json:"failover_ms"` // kill → first 202 to a produce sent after the kill
	KilledAt   string  `json:"killed_at"`
	Sent       int     `json:"sent"`
	Skipped    int     `json:"skipped"` // ticks with maxInflight produces outstanding
	// AcceptedBeforeKill counts 202s to produces sent before the kill.
	AcceptedBeforeKill int `json:"accepted_before_kill"`
	// AnswersAfterKill counts, by status ("0" = no answer), the answers to produces sent
	// after the kill and answered up to the first 202.
	AnswersAfterKill map[string]int `json:"answers_after_kill"`
}

func runFailover(args []string) (failoverResult, error) {
	cfg, err := parseFailover(args)
	if err != nil {
		return failoverResult{}, err
	}
	c, err := client.New(cfg.server, client.WithTimeout(20*time.Second))
	if err != nil {
		return failoverResult{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := &producer{c: c, topic: cfg.topic, part: cfg.part, answers: make(chan answer, maxInflight), slots: make(chan struct{}, maxInflight)}
	go p.run(ctx, cfg.interval)
	killAt, err := p.killAfter(cfg.warmup, cfg.pid)
	if err != nil {
		return failoverResult{}, err
	}
	all, err := p.collect(killAt, cfg.timeout, cfg.grace)
	cancel()
	if werr := writeAnswers(cfg.logPath, all, killAt); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return failoverResult{}, err
	}
	return summarize(all, killAt, int(p.sent.Load()), int(p.skipped.Load()))
}

// producer sends one record per tick, each on its own goroutine, and hands the answers on.
type producer struct {
	c       *client.Client
	topic   string
	part    int
	answers chan answer
	slots   chan struct{}
	sent    atomic.Int64
	skipped atomic.Int64
	got     []answer // the warm-up's answers (killAfter, then collect)
}

func (p *producer) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case p.slots <- struct{}{}:
		default:
			p.skipped.Add(1)
			continue
		}
		p.sent.Add(1)
		go p.send(ctx, seq)
	}
}

func (p *producer) send(ctx context.Context, seq int) {
	defer func() { <-p.slots }()
	a := answer{sent: time.Now()}
	part := p.part
	err := p.c.Produce(ctx, p.topic, []byte("failover-"+strconv.Itoa(seq)), client.ProduceOptions{Partition: &part})
	a.done = time.Now()
	a.status = statusOf(err)
	select {
	case p.answers <- a:
	case <-ctx.Done():
	}
}

// statusOf is the HTTP status of a produce's outcome: 202 for success, the refusal's status,
// or 0 when no answer came.
func statusOf(err error) int {
	var ae *client.Error
	switch {
	case err == nil:
		return 202
	case errors.As(err, &ae):
		return ae.Status
	}
	return 0
}

// killAfter collects answers for warmup, checks that the partition took produces, then kills
// pid with SIGKILL and returns the time just before the signal was sent.
func (p *producer) killAfter(warmup time.Duration, pid int) (time.Time, error) {
	end := time.NewTimer(warmup)
	defer end.Stop()
	for waiting := true; waiting; {
		select {
		case a := <-p.answers:
			p.got = append(p.got, a)
		case <-end.C:
			waiting = false
		}
	}
	if accepted(p.got) == 0 {
		return time.Time{}, fmt.Errorf("no 202 in the %s warm-up: is the topic ready?", warmup)
	}
	killAt := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return time.Time{}, fmt.Errorf("kill %d: %w", pid, err)
	}
	return killAt, nil
}

// collect gathers answers until grace has passed since the first 202 to a produce sent after
// killAt, or timeout has passed since killAt.
func (p *producer) collect(killAt time.Time, timeout, grace time.Duration) ([]answer, error) {
	all := p.got
	deadline := time.NewTimer(time.Until(killAt.Add(timeout)))
	defer deadline.Stop()
	var stop <-chan time.Time
	for {
		select {
		case a := <-p.answers:
			all = append(all, a)
			if stop == nil && a.status == 202 && !a.sent.Before(killAt) {
				stop = time.After(grace)
			}
		case <-stop:
			return all, nil
		case <-deadline.C:
			return all, fmt.Errorf("no 202 within %s of the kill", timeout)
		}
	}
}

func accepted(as []answer) int {
	n := 0
	for _, a := range as {
		if a.status == 202 {
			n++
		}
	}
	return n
}

// firstAcceptedAfter is the earliest answer time of a 202 to a produce sent at or after
// killAt; ok is false when there is none.
func firstAcceptedAfter(as []answer, killAt time.Time) (first time.Time, ok bool) {
	for _, a := range as {
		if a.status == 202 && !a.sent.Before(killAt) && (!ok || a.done.Before(first)) {
			first, ok = a.done, true
		}
	}
	return first, ok
}

// summarize turns the answers into the printed result.
func summarize(as []answer, killAt time.Time, sent, skipped int) (failoverResult, error) {
	first, ok := firstAcceptedAfter(as, killAt)
	if !ok {
		return failoverResult{}, errors.New("no 202 to a produce sent after the kill")
	}
	r := failoverResult{FailoverMs: ms(first.Sub(killAt)), KilledAt: killAt.UTC().Format(time.RFC3339Nano),
		Sent: sent, Skipped: skipped, AnswersAfterKill: map[string]int{}}
	for _, a := range as {
		switch {
		case a.sent.Before(killAt):
			if a.status == 202 {
				r.AcceptedBeforeKill++
			}
		case !a.done.After(first):
			r.AnswersAfterKill[strconv.Itoa(a.status)]++
		}
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// writeAnswers writes one line per answer to path ("" = none): sent and answered in ms since
// the kill, and the status.
func writeAnswers(path string, as []answer, killAt time.Time) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := formatAnswers(f, as, killAt); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func formatAnswers(w io.Writer, as []answer, killAt time.Time) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# sent_ms done_ms status (ms since the kill; status 0 = no answer)")
	for _, a := range as {
		fmt.Fprintf(bw, "%.1f %.1f %d\n", ms(a.sent.Sub(killAt)), ms(a.done.Sub(killAt)), a.status)
	}
	return bw.Flush()
}
