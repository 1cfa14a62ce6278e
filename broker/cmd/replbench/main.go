// Command replbench times the two replication targets of docs/benchmarks.md ("Replicated
// topics: failover and catch-up") against a running cluster; hack/bench-replication.sh starts
// the nodes and calls it.
//
//	replbench failover -server URL -topic T -kill-pid PID [-partition 0] [-interval 10ms] [-warmup 3s] [-log FILE]
//	replbench catchup  -server URL -topic T -replica ID -follower URL -start-ns NS [-poll 100ms]
//
// failover produces one small record every interval to one partition through -server (a node
// that does not lead it), kills PID (the leader) with SIGKILL after the warm-up, and reports the time
// from the kill to the first 202 answering a produce sent after it. catchup polls the topic
// until replica ID is back in the ISR of every partition with no lag, and reports how long that
// took from -start-ns (when the wiped node was started) and from its first fetched byte.
// Each mode prints one JSON object on stdout.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: replbench failover|catchup [flags]"))
	}
	var (
		out any
		err error
	)
	switch os.Args[1] {
	case "failover":
		out, err = runFailover(os.Args[2:])
	case "catchup":
		out, err = runCatchup(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: want failover or catchup", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "replbench:", err)
	os.Exit(1)
}
