#!/usr/bin/env bash
# Benchmarks a fresh single node with `narad bench` and writes docs/benchmarks.md.
# Usage: hack/bench.sh path/to/narad
set -euo pipefail
narad="${1:?usage: hack/bench.sh path/to/narad}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/docs/benchmarks.md"
work="$(mktemp -d)"
addr="127.0.0.1:17942"
pids=()
cleanup() {
  kill "$pid" "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$narad" serve --dev --data-dir "$work/data" --http-addr "$addr" --cluster-addr 127.0.0.1:17943 \
  --log-level warn >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fsS "http://$addr/readyz" >/dev/null

export NARAD_ADDR="http://$addr"
count="${BENCH_COUNT:-50000}"
run() { "$narad" bench "$@" --json; }

# The disk's own fsync rate, for reference (4 KiB writes + fdatasync).
fsync_rate="$(cd "$root/broker" && go run ./cmd/fsyncbench -dir "$work" -n 2000)"

p1="$(run bench-p1 --create --partitions 3 --count "$count" --size 1024 --workers 1)"
p16="$(run bench-p16 --create --partitions 3 --count "$count" --size 1024 --workers 16)"
p64="$(run bench-p64 --create --partitions 3 --count "$count" --size 1024 --workers 64)"
full="$(run bench-full --create --partitions 3 --count "$count" --size 1024 --workers 64 --consumers 64 --consume)"
batch="$(run bench-batch --create --partitions 3 --count "$((count * 10))" --size 1024 --workers 64 --consumers 64 --consume --batch 100)"
batch8="$(run bench-batch8 --create --partitions 8 --count "$((count * 20))" --size 1024 --workers 64 --consumers 64 --consume --batch 100)"

# Three nodes on loopback (127.0.0.2x), same machine: the single node is stopped first so
# the cluster has the CPUs the single node had.
kill "$pid"; wait "$pid" 2>/dev/null || true
export NARAD_CLUSTER_SECRET="bench-$(date +%s)"
urls=()
for i in 1 2 3; do
  h="127.0.0.2$i"
  if [ "$i" = 1 ]; then how=(--bootstrap); else how=(--join 127.0.0.21:17943); fi
  "$narad" serve --node-id "n$i" --data-dir "$work/n$i" --http-addr "$h:17942" --cluster-addr "$h:17943" \
    --security-enabled=false --log-level warn "${how[@]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 150); do
    curl -fsS "http://$h:17942/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "http://$h:17942/readyz" >/dev/null
  urls+=("http://$h:17942")
done
servers="$(IFS=,; echo "${urls[*]}")"
# Wait until all three are voters (the controller promotes joiners within a tick).
for _ in $(seq 1 150); do
  [ "$(curl -fsS "${urls[0]}/v1/cluster/members" | grep -o '"raft_role":"voter"' | wc -l)" = 3 ] && break
  sleep 0.2
done
export NARAD_ADDR="${urls[0]}"
remote_records() { curl -fsS "$1/metrics" | awk '/^narad_dispatched_records_total\{destination="remote"\}/ {print $2}'; }
r0="$(remote_records "${urls[0]}")"; r0="${r0:-0}"
d3="$(run bench3-dispatch --create --partitions 6 --count "$count" --size 1024 --workers 64)"
r1="$(remote_records "${urls[0]}")"; r1="${r1:-0}"
# Fan-out across three nodes: a child created with parent (its partitions placed away from the
# parent's), then a batched produce-only run into the parent through all nodes; the copy rate is
# the records the child holds over the time from the run's start until it holds them all.
curl -fsS -XPOST "${urls[0]}/v1/topics" -d '{"name":"bench3-fo","partitions":3}' >/dev/null
curl -fsS -XPOST "${urls[0]}/v1/topics" -d '{"name":"bench3-fo-child","partitions":3,"parent":"bench3-fo"}' >/dev/null
fo_count=$((count * 4))
fo_start="$(date +%s.%N)"
fo_prod="$(run bench3-fo --count "$fo_count" --size 1024 --workers 64 --batch 100 --servers "$servers")"
fo_rate="$(python3 - "${urls[1]}" "$fo_count" "$fo_start" <<'PY'
import json, sys, time, urllib.request
url, want, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.time() + 300
while time.time() < deadline:
    d = json.load(urllib.request.urlopen(url + "/v1/topics/bench3-fo-child"))
    got = sum(p.get("high_watermark", 0) for p in d["partition_stats"] if p.get("available"))
    if got >= want:
        print("%.0f" % (got / (time.time() - start)))
        break
    time.sleep(0.05)
else:
    print("0")
PY
)"

full3="$(run bench3-full --create --partitions 6 --count "$count" --size 1024 --workers 64 --consumers 64 --consume --servers "$servers")"
batch3="$(run bench3-batch --create --partitions 6 --count "$((count * 10))" --size 1024 --workers 64 --consumers 64 --consume --batch 100 --servers "$servers")"

# Partition moves on four fresh nodes (the three-node cluster is stopped first).
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
pids=()
moves_md="$(BENCH_MOVE_HOT_RATE=0 "$root/hack/bench-moves.sh" "$narad")"
moves_md="$moves_md"$'\n'"$(BENCH_MOVE_HEADER=0 BENCH_MOVE_HOT_RATE=2000 "$root/hack/bench-moves.sh" "$narad")"
moves_md="$moves_md"$'\n\n'"Reproduce: \`hack/bench-moves.sh bin/narad [GiB]\` with BENCH_MOVE_HOT_RATE=0 and 2000 (part of \`make bench\`)."

# Remote children: a remote child into a second cluster against a local child, same backlog.
remote_md="$("$root/hack/bench-remote.sh" "$narad")"

# Fan-out copy rate (Go benchmarks on one node, 100,000 × 1 KiB parent records backlogged).
fanout_bench="$(cd "$root/broker" && go test -run '^$' -bench 'BenchmarkFanout' -benchtime 1x ./internal/engine/ | grep '^Benchmark')"
idle_bench="$(cd "$root/broker" && go test -run '^$' -bench 'BenchmarkIdleDelayCursor' -benchtime 1x ./internal/fanout/ | grep '^Benchmark')"

field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d.get(sys.argv[2], ''))" "$1" "$2"; }
row() {
  local flow; flow="$(field "$2" full_flow_msgs_per_sec)"
  [ "$flow" = "0" ] || [ -z "$flow" ] && flow="-"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$(field "$2" produce_msgs_per_sec)" "$(field "$2" p50_ms)" \
    "$(field "$2" p95_ms)" "$(field "$2" p99_ms)" "$flow"
}

{
  echo "# Benchmarks"
  echo
  echo "Measured with \`make bench\` (hack/bench.sh): a fresh single node (\`narad serve --dev\`),"
  echo "1 KiB messages, topics with 3 partitions unless a row says otherwise, driven by \`narad bench\` on"
  echo "the same machine (its HTTP/1.1 keep-alive client sends each request on the calling goroutine, so the"
  echo "load generator takes less of the two cores from the broker it measures)."
  echo
  echo "- Date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo "- Commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- Disk fsync rate (4 KiB write + fdatasync, same filesystem): ${fsync_rate}"
  echo
  echo "| scenario | produce msg/s | p50 ms | p95 ms | p99 ms | full flow msg/s |"
  echo "|---|---|---|---|---|---|"
  row "produce, 1 producer" "$p1"
  row "produce, 16 producers" "$p16"
  row "produce, 64 producers" "$p64"
  row "full flow, 64 producers + 64 consumers" "$full"
  row "full flow, batch 100, 64 + 64" "$batch"
  row "full flow, batch 100, 64 + 64, 8 partitions" "$batch8"
  echo
  echo "In the batched flow, 64 consumers asking for 100 messages each want 6,400 leases at once, and a"
  echo "partition grants at most 1,024 (\`max_in_flight\`, the default): 3 partitions hold 3,072, the other"
  echo "consumers wait in their long polls, and the rate is capped near 3,072 leases per consume-and-ack"
  echo "round trip. With 8 partitions (8,192 leases) every consumer gets a full batch; give a topic at"
  echo "least consumers × batch / max_in_flight partitions (or raise \`max_in_flight\`) for this load."
  echo
  echo "## Three nodes"
  echo
  echo "The same machine runs three nodes (\`narad serve --join\`, loopback 127.0.0.21-23, 6 partitions, two"
  echo "per node); \`narad bench --servers\` spreads producers and consumers round-robin over all three. Every"
  echo "node accepts produce for every partition: two thirds of the records are committed on another"
  echo "node (CommitProduceBatch), and consumes and acks of remote partitions go over node RPC."
  echo
  echo "| scenario | produce msg/s | p50 ms | p95 ms | p99 ms | full flow msg/s |"
  echo "|---|---|---|---|---|---|"
  row "3 nodes, produce on one node, 64 producers" "$d3"
  row "3 nodes, full flow, 64 producers + 64 consumers" "$full3"
  row "3 nodes, full flow, batch 100, 64 + 64" "$batch3"
  echo
  python3 - "$full" "$full3" "$batch8" "$batch3" "$d3" "$r0" "$r1" <<'PY'
import json, sys
f1, f3, b1, b3, d3 = (json.loads(a) for a in sys.argv[1:6])
r0, r1 = float(sys.argv[6]), float(sys.argv[7])
secs = d3["produced"] / d3["produce_msgs_per_sec"] if d3.get("produce_msgs_per_sec") else 0
rate = (r1 - r0) / secs if secs else 0
print(f"- Three-node / one-node full flow: single-message {f3['full_flow_msgs_per_sec'] / f1['full_flow_msgs_per_sec']:.2f}, "
      f"batched {b3['full_flow_msgs_per_sec'] / b1['full_flow_msgs_per_sec']:.2f} (6 partitions against one node's 8).")
print(f"- Cross-node dispatch: {r1 - r0:.0f} records committed on another node during the produce-only run, "
      f"{rate:.0f} records/s (`narad_dispatched_records_total{{destination=\"remote\"}}` on the accepting node).")
PY
  echo "- Fan-out across three nodes: $(field "$fo_prod" produce_msgs_per_sec) msg/s batched produce into a parent through all three nodes;"
  echo "  its child (created with \`parent\`, partitions placed away from the parent's) held all $fo_count copies at $fo_rate records/s"
  echo "  (from the start of the produce run until the child's high watermarks reached the count)."
  echo
  echo "## Fan-out"
  echo
  echo "One node; a parent partition holds 100,000 committed 1 KiB records, then the fan-out runner"
  echo "starts and the cursors copy the backlog into 3-partition children. For comparison, the same node's"
  echo "single-partition produce commit rate (16 producers × 100 records per call through the produce path:"
  echo "ingress WAL group commit, dispatcher, partition commit; no HTTP) and its raw single-partition commit"
  echo "rate (CommitLocal, batches of 1,000). Measured with"
  echo "\`cd broker && go test -run '^\$' -bench BenchmarkFanout -benchtime 1x ./internal/engine/\` (part of \`make bench\`)."
  echo
  echo "| benchmark | records/s per child | records/s total | MB/s total | produce records/s (1 partition) | copy / produce | raw commit records/s | copy / raw commit |"
  echo "|---|---|---|---|---|---|---|---|"
  echo "$fanout_bench" | python3 -c '
import sys
for line in sys.stdin:
    f = line.split()
    m = {f[i + 1]: f[i] for i in range(2, len(f) - 1, 2)}
    print("| %s | %.0f | %.0f | %.1f | %.0f | %.2f | %.0f | %.2f |" % (f[0].split("-")[0], float(m["records/s/child"]), float(m["records/s"]), float(m["MB/s"]), float(m["produce-records/s"]), float(m["copy/produce"]), float(m["commit-records/s"]), float(m["copy/commit"])))
'
  echo
  echo "An idle delay child costs the same with 1 or 1,000,000 pending (not yet due) records: one delay"
  echo "cursor (1 h delay, wake cap shortened to 500 ms so the 2 s window holds wakes) over a real parent"
  echo "log (\`go test -run '^\$' -bench IdleDelayCursor -benchtime 1x ./internal/fanout/\`):"
  echo
  echo "| pending records | CPU ms per 2 s | allocated KiB per 2 s | live heap growth KiB | reads per 2 s |"
  echo "|---|---|---|---|---|"
  echo "$idle_bench" | python3 -c '
import sys
for line in sys.stdin:
    f = line.split()
    m = {f[i + 1]: f[i] for i in range(2, len(f) - 1, 2)}
    print("| %s | %.2f | %.2f | %.2f | %.0f |" % (f[0].split("=")[1].split("-")[0], float(m["cpu-ms/window"]), float(m["alloc-KiB/window"]), float(m["heap-KiB"]), float(m["reads/window"])))
'
  echo
  echo "$moves_md"
  echo
  echo "$remote_md"
  echo
  echo "Reproduce: \`hack/bench-remote.sh bin/narad [records] [size]\` (part of \`make bench\`)."
  echo
  echo "Reproduce: \`make bench\` (set BENCH_COUNT to change the message count, default 50000;"
  echo "the batched run uses ten times as many). Load generator and broker share the machine."
  echo
  # Hand-written sections (measurements of other commands and their reading) live in these
  # files, not in the page, so that a re-run keeps them: replicated topics
  # (hack/bench-replication.sh prints its section for bench-notes-replication.md), then notes.
  cat "$root/hack/bench-notes-replication.md"
  cat "$root/hack/bench-notes.md"
} >"$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
