#!/usr/bin/env bash
# What one message costs a cluster in node-to-node calls and fsyncs: three local nodes
# (hack/local-cluster.sh on ports 17942/17943), topics b-r1 (R = 1) and b-r3 (R = 3, M = 2) of 3
# partitions, one single-message full flow each (`narad bench` with 8 producers and 8
# consumers, BENCH_WORKERS of each, through all three nodes, --count 8000 or BENCH_SINGLE_COUNT). Before and after
# each run it reads every node's /metrics and prints, per message, the node RPC calls the
# nodes served by method (narad_node_rpc_duration_seconds_count), the segment fsyncs and the
# HTTP requests. A stream (a follower's fetch stream, op 37) counts once, when it ends: its
# fetches are not calls. Counts, not times: they hold on a busy machine too.
#
# BENCH_STRACE=1 also counts the system calls all three nodes make during each flow
# (`strace -c -f` attached to every node for the run) and prints them per message by call,
# nanosleep apart (the runtime's idle polling, which scales with time, not messages). strace
# slows the nodes down several times over, so take the rates of such a run as meaningless.
#
#   hack/bench-round-trips.sh [NARAD_BIN]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "$(dirname "${1:-$root/bin/narad}")" && pwd)/$(basename "${1:-$root/bin/narad}")"
n="${BENCH_SINGLE_COUNT:-8000}"
export NARAD_BIN="$bin" NARAD_LOCAL_HTTP_PORT=17942 NARAD_LOCAL_CLUSTER_PORT=17943
lc="$root/hack/local-cluster.sh"
first=http://127.0.0.2:17942
servers=http://127.0.0.2:17942,http://127.0.0.3:17942,http://127.0.0.4:17942
work="$(mktemp -d)"

"$lc" clean >/dev/null 2>&1 || true
trap '"$lc" stop >/dev/null 2>&1 || true; "$lc" clean >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$lc" start 3 >/dev/null
"$bin" --server "$first" topic add b-r1 --partitions 3 >/dev/null
"$bin" --server "$first" topic add b-r3 --partitions 3 --replication-factor 3 --min-insync 2 >/dev/null
"$lc" settle b-r3 # leaderships taken up and back on their preferred leaders

scrape() {
  local i
  for i in 2 3 4; do curl -fsS "http://127.0.0.$i:17942/metrics"; done >"$1"
}

# strace_start attaches strace -c to every node (when BENCH_STRACE=1), strace_stop detaches
# them, strace_report prints the system calls per message.
tracers=()
strace_start() {
  [[ "${BENCH_STRACE:-0}" == 1 ]] || return 0
  command -v strace >/dev/null || { echo "BENCH_STRACE=1 needs strace" >&2; exit 1; }
  local i
  tracers=()
  for i in 1 2 3; do
    strace -c -f -q -o "$work/strace.$i" -p "$(cat "$root/.narad/cluster/n$i/pid")" &
    tracers+=($!)
  done
  sleep 1 # attached to every thread before the load starts
}
strace_stop() {
  [[ "${BENCH_STRACE:-0}" == 1 ]] || return 0
  kill -INT "${tracers[@]}" 2>/dev/null || true
  wait "${tracers[@]}" 2>/dev/null || true
}
strace_report() {
  [[ "${BENCH_STRACE:-0}" == 1 ]] || return 0
  python3 - "$1" "$work"/strace.1 "$work"/strace.2 "$work"/strace.3 <<'PY'
import re, sys
n, calls = int(sys.argv[1]), {}
for path in sys.argv[2:]:
    for l in open(path):
        f = l.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(f) >= 5 and re.match(r'^[\d.]+$', f[0]) and f[-1] != "total":
            calls[f[-1]] = calls.get(f[-1], 0) + int(f[3])
sleep = calls.pop("nanosleep", 0)
top = sorted(calls.items(), key=lambda kv: -kv[1])
print("  system calls per message (3 nodes): %.1f (%s); nanosleep %.1f" % (sum(calls.values()) / n,
      ", ".join("%s %.1f" % (k, v / n) for k, v in top if v / n >= 0.1), sleep / n))
PY
}

for topic in b-r1 b-r3; do
  scrape "$work/before"
  strace_start
  "$bin" --server "$first" bench "$topic" --servers "$servers" --workers "${BENCH_WORKERS:-8}" --consume --json --count "$n" \
    >"$work/bench.json" 2>/dev/null
  sleep 1 # a long-poll's last probe lands
  strace_stop
  scrape "$work/after"
  python3 - "$topic" "$n" "$work/before" "$work/after" "$work/bench.json" <<'PY'
import json, re, sys
topic, n, before, after, bench = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
line = re.compile(r'^(narad_node_rpc_duration_seconds_count\{method="(\w+)"\}|narad_storage_fsync_duration_seconds_count|narad_http_requests_total)(\{.*\})? (\S+)$')
def load(path):
    out = {}
    for l in open(path):
        m = line.match(l.strip())
        if m:
            key = m.group(2) or m.group(1)
            out[key] = out.get(key, 0) + float(m.group(4))
    return out
a, b = load(before), load(after)
d = {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0) > 0}
rate = json.load(open(bench))["full_flow_msgs_per_sec"]
rpc = {k: v for k, v in d.items() if not k.startswith("narad_") and v / n >= 0.005}
print("%s: %d messages, full flow %.0f msg/s" % (topic, n, rate))
print("  node RPC calls per message: %.2f (%s)" % (sum(rpc.values()) / n,
      ", ".join("%s %.2f" % (k, v / n) for k, v in sorted(rpc.items(), key=lambda kv: -kv[1]))))
print("  segment fsyncs per message: %.2f" % (d.get("narad_storage_fsync_duration_seconds_count", 0) / n))
print("  HTTP requests per message: %.2f" % (d.get("narad_http_requests_total", 0) / n))
PY
  strace_report "$n"
done
