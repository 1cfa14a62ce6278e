package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"narad.dev/broker/client"
)

// Bench limits and defaults.
const (
	benchMaxSize        = 1 << 20         // produce body limit (docs/internals/http-api.md §1.7)
	benchMaxBatch       = 4096            // batch produce record limit
	benchConsumeWait    = 2 * time.Second // long poll of bench consumers; short so they stop promptly
	benchRequestTimeout = 30 * time.Second
)

// benchConfig is the validated flag set of one `narad bench` run.
type benchConfig struct {
	Topic      string
	Count      int           // messages to produce, ≥ 1
	Size       int           // bytes per message, 1 … 1 MiB
	Workers    int           // concurrent producers, ≥ 1
	Consumers  int           // concurrent consumers (with Consume), ≥ 1
	Consume    bool          // run the full flow: produce → consume → ack
	Batch      int           // 0 = one message per request; N ≥ 1 = batch endpoints with N per request
	Create     bool          // create the topic when missing
	Partitions int           // partition count for Create (0 = server default)
	JSON       bool          // print one JSON result object
	Timeout    time.Duration // bound on the whole run
	Partition  int           // ≥ 0: pin every message to this partition; -1: the server picks
	Rate       float64       // > 0: produce at most this many messages per second in total
}

func (c *benchConfig) validate() error {
	switch {
	case c.Count < 1:
		return errors.New("--count must be at least 1")
	case c.Size < 1 || c.Size > benchMaxSize:
		return fmt.Errorf("--size must be 1 … %d bytes", benchMaxSize)
	case c.Workers < 1:
		return errors.New("--workers must be at least 1")
	case c.Consume && c.Consumers < 1:
		return errors.New("--consumers must be at least 1")
	case c.Batch < 0 || c.Batch > benchMaxBatch:
		return fmt.Errorf("--batch must be 0 … %d", benchMaxBatch)
	case c.Timeout <= 0:
		return errors.New("--timeout must be positive")
	case c.Partitions < 0:
		return errors.New("--partitions must not be negative")
	case c.Partition < -1:
		return errors.New("--partition must be a partition index (or -1 for none)")
	case c.Rate < 0:
		return errors.New("--rate must not be negative")
	}
	return nil
}

func (a *app) benchCmd() *cobra.Command {
	var cfg benchConfig
	var cpuProfile string
	var servers []string
	cmd := &cobra.Command{
		Use:   "bench <topic>",
		Short: "Load-test produce (and with --consume the full produce → consume → ack flow)",
		Long: "Concurrent producers send --count messages of --size bytes; with --consume, consumers run at the\n" +
			"same time and the run ends when every produced message was consumed and acked. Reports produce\n" +
			"msg/s, p50/p95/p99 latency of accepted produce requests and, with --consume, the full-flow msg/s\n" +
			"(acked / wall time). Consumers ack every message they receive but count only this run's (tagged by a\n" +
			"per-run payload prefix when --size ≥ 13).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Topic = args[0]
			if !cmd.Flags().Changed("consumers") {
				cfg.Consumers = cfg.Workers
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			conns := cfg.Workers + 4
			if cfg.Consume {
				conns += cfg.Consumers
			}
			c, err := a.newClientAt(cmd, "", conns, true)
			if err != nil {
				return err
			}
			clients := []*client.Client{c}
			if len(servers) > 0 {
				clients = clients[:0]
				per := conns/len(servers) + 1
				for _, s := range servers {
					sc, err := a.newClientAt(cmd, s, per, true)
					if err != nil {
						return err
					}
					clients = append(clients, sc)
				}
				c = clients[0]
			}
			ctx := cmd.Context()
			if cfg.Create {
				if err := ensureTopic(ctx, c, cfg, cmd.ErrOrStderr()); err != nil {
					return err
				}
				if err := awaitTopic(ctx, clients, cfg.Topic); err != nil {
					return err
				}
			}
			if cpuProfile != "" {
				stopProfile, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			// The load generator allocates per request (net/http); a less eager GC leaves more CPU
			// to the broker when both share a machine. Its heap stays small either way.
			defer debug.SetGCPercent(debug.SetGCPercent(400))
			r := newBenchRun(cfg, clients...)
			stderr := cmd.ErrOrStderr()
			stop := r.startProgress(stderr, !cfg.JSON && a.writerIsTerminal(stderr), a.progressTick)
			res, runErr := r.run(ctx)
			stop()
			if res.Produced > 0 || res.ProduceErrors > 0 || runErr == nil {
				var perr error
				if cfg.JSON {
					perr = printJSON(cmd.OutOrStdout(), res)
				} else {
					perr = res.writeText(cmd.OutOrStdout())
				}
				if perr != nil {
					return perr
				}
			}
			return runErr
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Count, "count", 10000, "messages to produce")
	f.IntVar(&cfg.Size, "size", 256, "message size in bytes")
	f.IntVar(&cfg.Workers, "workers", 8, "concurrent producers")
	f.IntVar(&cfg.Consumers, "consumers", 8, "concurrent consumers with --consume (default: --workers)")
	f.BoolVar(&cfg.Consume, "consume", false, "consume and ack concurrently; report the full-flow rate")
	f.IntVar(&cfg.Batch, "batch", 0, "records per produce/batch request, max_messages per consume and acks per ack/batch (0 = single-message endpoints)")
	f.BoolVar(&cfg.Create, "create", false, "create the topic if it is missing")
	f.IntVar(&cfg.Partitions, "partitions", 0, "partitions for --create (0 = server default)")
	f.BoolVar(&cfg.JSON, "json", false, "print the results as one JSON object")
	f.IntVar(&cfg.Partition, "partition", -1, "pin every message to this partition (-1: the server picks)")
	f.Float64Var(&cfg.Rate, "rate", 0, "produce at most this many messages per second in total (0: as fast as possible)")
	f.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "give up after this long")
	f.StringSliceVar(&servers, "servers", nil, "spread producers and consumers round-robin over these server URLs (the nodes of a cluster); default: --server")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the load generator to this file")
	_ = f.MarkHidden("cpuprofile")
	return cmd
}

// ensureTopic creates cfg.Topic when it does not exist (a concurrent create is fine).
func ensureTopic(ctx context.Context, c *client.Client, cfg benchConfig, stderr interface{ Write([]byte) (int, error) }) error {
	_, err := c.GetTopic(ctx, cfg.Topic, nil)
	if err == nil {
		return nil
	}
	if !client.IsStatus(err, http.StatusNotFound) {
		return err
	}
	_, err = c.CreateTopic(ctx, client.CreateTopicRequest{Name: cfg.Topic, Partitions: cfg.Partitions})
	if err != nil && !client.IsStatus(err, http.StatusConflict) {
		return fmt.Errorf("creating topic %q: %w", cfg.Topic, err)
	}
	fmt.Fprintf(stderr, "created topic %q\n", cfg.Topic)
	return nil
}

// awaitTopic waits (up to 10 s) until every server's replica knows the topic: a create returns
// once the leader applied it, and other nodes follow milliseconds later.
func awaitTopic(ctx context.Context, clients []*client.Client, topic string) error {
	if len(clients) < 2 {
		return nil // the create answered on this very server
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range clients {
		for {
			_, err := c.GetTopic(ctx, topic, nil)
			if err == nil {
				break
			}
			if !client.IsStatus(err, http.StatusNotFound) || time.Now().After(deadline) {
				return fmt.Errorf("topic %q on %s: %w", topic, c.BaseURL(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// benchTagLen is the length of the per-run payload prefix ("nb" + 10 chars + "-") that lets
// consumers count only this run's messages when the topic holds older ones.
const benchTagLen = 13

// benchPayload returns the message body of a run and its tag (nil when size is too small to
// carry one, in which case every consumed message counts). The body is printable ASCII, so it
// travels as a JSON string in batch records and consume responses.
func benchPayload(size int) (body, tag []byte) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var rnd [10]byte
	_, _ = rand.Read(rnd[:])
	body = make([]byte, size)
	for i := range body {
		body[i] = alphabet[i%len(alphabet)]
	}
	if size < benchTagLen {
		return body, nil
	}
	tag = make([]byte, 0, benchTagLen)
	tag = append(tag, "nb"...)
	for _, b := range rnd {
		tag = append(tag, alphabet[int(b)%len(alphabet)])
	}
	tag = append(tag, '-')
	copy(body, tag)
	return body, tag
}

// startCPUProfile profiles the load generator itself, so its own cost can be told apart from
// the server's when both share a machine.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
