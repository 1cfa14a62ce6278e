package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"narad.dev/broker/client"
)

// catchupConfig is the flag set of `replbench catchup`.
type catchupConfig struct {
	server   string // a node that stays up: describes the topic
	follower string // the wiped node's HTTP URL: its replication metrics
	topic    string
	replica  string // the wiped node's id
	start    time.Time
	poll     time.Duration
	timeout  time.Duration
}

func parseCatchup(args []string) (catchupConfig, error) {
	var c catchupConfig
	var startNs int64
	fs := flag.NewFlagSet("catchup", flag.ContinueOnError)
	fs.StringVar(&c.server, "server", "", "a node that stays up (describes the topic)")
	fs.StringVar(&c.follower, "follower", "", "the HTTP URL of the node catching up")
	fs.StringVar(&c.topic, "topic", "", "topic to watch")
	fs.StringVar(&c.replica, "replica", "", "node id of the replica catching up")
	fs.Int64Var(&startNs, "start-ns", 0, "when the node catching up was started (Unix ns); 0 = now")
	fs.DurationVar(&c.poll, "poll", 100*time.Millisecond, "time between polls")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.server == "" || c.follower == "" || c.topic == "" || c.replica == "":
		return c, errors.New("-server, -follower, -topic and -replica are required")
	case c.poll <= 0 || c.timeout <= 0:
		return c, errors.New("-poll and -timeout must be positive")
	}
	c.start = time.Now()
	if startNs > 0 {
		c.start = time.Unix(0, startNs)
	}
	return c, nil
}

// catchupResult is what `replbench catchup` prints.
type catchupResult struct {
	TotalMs      float64 `json:"total_ms"`       // start → in the ISR with no lag on every partition
	FirstFetchMs float64 `json:"first_fetch_ms"` // start → first replicated byte counted on the follower
	CopyMs       float64 `json:"copy_ms"`        // first fetched byte → in sync
	Bytes        int64   `json:"bytes"`          // the partitions' size on their leaders at the end
	InBytes      float64 `json:"in_bytes"`       // the follower's narad_replication_bytes_total{direction="in"}
	Partitions   int     `json:"partitions"`
}

func runCatchup(args []string) (catchupResult, error) {
	cfg, err := parseCatchup(args)
	if err != nil {
		return catchupResult{}, err
	}
	server, err := client.New(cfg.server, client.WithTimeout(5*time.Second))
	if err != nil {
		return catchupResult{}, err
	}
	follower, err := client.New(cfg.follower, client.WithTimeout(2*time.Second))
	if err != nil {
		return catchupResult{}, err
	}
	ctx, cancel := context.WithDeadline(context.Background(), cfg.start.Add(cfg.timeout))
	defer cancel()
	w := &catchupWatch{replica: cfg.replica, seenOut: map[int]bool{}}
	tick := time.NewTicker(cfg.poll)
	defer tick.Stop()
	for {
		if st, ok := w.pollFollower(ctx, follower); ok && w.firstFetch.IsZero() && st > 0 {
			w.firstFetch = time.Now()
		}
		d, err := server.GetTopic(ctx, cfg.topic, nil)
		if err == nil && w.inSync(d.PartitionStats) {
			return w.result(ctx, follower, d.PartitionStats, cfg.start, time.Now()), nil
		}
		select {
		case <-ctx.Done():
			return catchupResult{}, fmt.Errorf("%s not in sync within %s (last describe error: %v)", cfg.replica, cfg.timeout, err)
		case <-tick.C:
		}
	}
}

// catchupWatch is the state of one catch-up watch.
type catchupWatch struct {
	replica    string
	seenOut    map[int]bool // partitions where the replica was seen outside the ISR
	firstFetch time.Time
}

// inSync reports whether the replica is in the ISR of every partition with a lag of 0 that its
// leader reported (or leads it again: the preferred leader gets its partitions back as soon as
// it is in sync), each after it was seen out of that ISR: a node that returns empty leaves
// the ISRs as it starts, and until then the leader's view of it is from before it was wiped.
func (w *catchupWatch) inSync(stats []client.PartitionStat) bool {
	all := len(stats) > 0
	for _, st := range stats {
		if !slices.Contains(st.ISR, w.replica) {
			w.seenOut[st.Index] = true
			all = false
			continue
		}
		lag, reported := st.FollowerLag[w.replica]
		if st.Leader == w.replica { // back in the ISR and given its preferred leadership back
			lag, reported = 0, true
		}
		if !w.seenOut[st.Index] || !reported || lag != 0 {
			all = false
		}
	}
	return all
}

// pollFollower reads the follower's replicated bytes in; ok is false while it does not answer.
func (w *catchupWatch) pollFollower(ctx context.Context, follower *client.Client) (float64, bool) {
	b, err := follower.Metrics(ctx)
	if err != nil {
		return 0, false
	}
	v, ok := metricValue(b, `narad_replication_bytes_total{direction="in"}`)
	return v, ok
}

func (w *catchupWatch) result(ctx context.Context, follower *client.Client, stats []client.PartitionStat, start, done time.Time) catchupResult {
	r := catchupResult{TotalMs: ms(done.Sub(start)), FirstFetchMs: -1, CopyMs: -1, Partitions: len(stats)}
	for _, st := range stats {
		r.Bytes += st.SizeBytes
	}
	if !w.firstFetch.IsZero() {
		r.FirstFetchMs, r.CopyMs = ms(w.firstFetch.Sub(start)), ms(done.Sub(w.firstFetch))
	}
	r.InBytes, _ = w.pollFollower(ctx, follower)
	return r
}

// metricValue finds the sample of series (name and labels exactly as exposed) in a Prometheus
// text exposition.
func metricValue(exposition []byte, series string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), series+" ")
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}
