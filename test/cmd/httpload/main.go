// Command httpload drives a Narad node with the standard library's net/http client over
// keep-alive connections, the way most client libraries do: one message per produce request,
// one long-poll consume and one ack per message. It prints a JSON report (the field names of
// `narad bench --json`) and exits 1 when a message answered with 202 was never consumed.
//
//	go run ./test/cmd/httpload -server http://127.0.0.1:7942 -topic load -create \
//	    -count 20000 -size 100 -workers 32 -consumers 32
//
// See docs/benchmarks.md ("Comparing two builds").
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"narad.dev/test/httpload"
)

func main() {
	var cfg httpload.Config
	flag.StringVar(&cfg.Server, "server", "http://127.0.0.1:7942", "node base URL")
	flag.StringVar(&cfg.Topic, "topic", "httpload", "topic")
	flag.BoolVar(&cfg.Create, "create", false, "create the topic first (an existing one is kept)")
	flag.IntVar(&cfg.Partitions, "partitions", 3, "partitions for -create")
	flag.IntVar(&cfg.Count, "count", 10000, "messages to produce")
	flag.IntVar(&cfg.Size, "size", 100, fmt.Sprintf("payload bytes (at least %d)", httpload.MinSize))
	flag.IntVar(&cfg.Workers, "workers", 32, "producers")
	flag.IntVar(&cfg.Consumers, "consumers", 32, "consumers (0: produce only)")
	flag.DurationVar(&cfg.Wait, "wait", 2*time.Second, "consume long-poll budget")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "whole run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := httpload.Run(ctx, cfg)
	if res.Generator != "" {
		out, _ := json.Marshal(res)
		fmt.Println(string(out))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
