#!/usr/bin/env bash
# Broker CPU per message of one node against three, unreplicated (R = 1): the issue's "three
# nodes at most 1.5 times one node's CPU per message". A fresh cluster of 1 node, then of 3
# (hack/local-cluster.sh on ports 17942/17943), a topic of 3 partitions, `narad bench` with
# 8 producers and 8 consumers (through every node of the cluster), single messages
# (--count 8000, BENCH_SINGLE_COUNT) and batches of 100 (--count 200000, BENCH_BATCH_COUNT).
# Each run prints the full-flow rate, the produce p99 and the nodes' utime + stime per message
# (from /proc: the load generator on the same cores is not counted), and each round the ratio
# of three nodes to one.
#
#   hack/bench-nodes-cpu.sh [NARAD_BIN] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "$(dirname "${1:-$root/bin/narad}")" && pwd)/$(basename "${1:-$root/bin/narad}")"
rounds="${2:-2}"
export NARAD_BIN="$bin" NARAD_LOCAL_HTTP_PORT=17942 NARAD_LOCAL_CLUSTER_PORT=17943
lc="$root/hack/local-cluster.sh"
tck="$(getconf CLK_TCK)"

"$lc" clean >/dev/null 2>&1 || true
trap '"$lc" stop >/dev/null 2>&1 || true; "$lc" clean >/dev/null 2>&1 || true' EXIT

# run NODES MODE: one bench run on a fresh cluster of NODES nodes; prints "rate p99 µs".
run() {
  local nodes="$1" mode="$2" n servers="" pids p t0=0 t1=0 out i
  local -a extra=()
  "$lc" stop >/dev/null 2>&1 || true
  "$lc" clean >/dev/null 2>&1 || true
  "$lc" start "$nodes" >/dev/null
  for i in $(seq 1 "$nodes"); do servers="${servers:+$servers,}http://127.0.0.$((i + 1)):17942"; done
  "$bin" --server http://127.0.0.2:17942 topic add b --partitions 3 >/dev/null
  sleep 2
  pids="$(cat "$root"/.narad/cluster/n*/pid)"
  if [ "$mode" = single ]; then n="${BENCH_SINGLE_COUNT:-8000}"; else n="${BENCH_BATCH_COUNT:-200000}"; extra=(--batch 100); fi
  for p in $pids; do t0=$((t0 + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  out="$("$bin" --server http://127.0.0.2:17942 bench b --servers "$servers" --workers 8 --consume --json \
    --count "$n" "${extra[@]}" 2>/dev/null)"
  for p in $pids; do t1=$((t1 + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  python3 - "$out" "$t0" "$t1" "$tck" "$n" <<'PY'
import json, sys
out, t0, t1, tck, n = sys.argv[1:]
d = json.loads(out)
print("%.0f %.1f %.1f" % (d["full_flow_msgs_per_sec"], d["p99_ms"], (float(t1) - float(t0)) / float(tck) / float(n) * 1e6))
PY
}

echo "| round | mode | 1 node msg/s, p99 ms, CPU/msg | 3 nodes msg/s, p99 ms, CPU/msg | CPU 3 / 1 |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for mode in single batch; do
    read -r r1 p1 c1 <<<"$(run 1 "$mode")"
    read -r r3 p3 c3 <<<"$(run 3 "$mode")"
    echo "| $round | $mode | $r1, $p1, $c1 µs | $r3, $p3, $c3 µs | $(python3 -c "print('%.2f' % ($c3 / $c1))") |"
  done
done
