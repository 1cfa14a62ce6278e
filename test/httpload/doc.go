// Package httpload is a load generator that talks to Narad the way most client libraries do:
// the standard library's net/http client over keep-alive connections, one message per
// produce request, one long-poll consume and one ack per message. `narad bench` uses a
// leaner fasthttp transport; comparing the two shows what the broker costs an ordinary client
// (docs/benchmarks.md, "Comparing two builds").
//
// Every payload carries the run's tag and a sequence number, so the run accounts for each
// message it was told was accepted (202): a message never consumed is lost and fails the run.
//
// Files:
//   - config.go: the run's shape (workers, consumers, size) and its checks.
//   - payload.go: the tagged payload, built and parsed.
//   - ledger.go: which sequences were accepted, consumed and acked.
//   - produce.go, consume.go: the producer and consumer loops (the HTTP calls).
//   - run.go: one run from start to result.
//   - result.go: the JSON report and its percentiles.
package httpload
