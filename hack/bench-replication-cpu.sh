#!/usr/bin/env bash
# The CPU a replicated message costs the cluster, against an unreplicated one: three local nodes
# (hack/local-cluster.sh on ports 17942/17943, so a dev cluster on the default ports is not
# touched), topics b-r1 (R = 1) and b-r3 (R = 3, M = 2) of 3 partitions, `narad bench` with 8
# producers and 8 consumers (BENCH_WORKERS of each) through all three nodes, single messages (--count 8000,
# BENCH_SINGLE_COUNT) and batches of 100 (--count 200000, BENCH_BATCH_COUNT), R = 1 and R = 3
# alternating. For each run it prints the full-flow rate, the produce p99 and the three nodes'
# utime+stime per message (from /proc), which the load generator on the same cores does not
# inflate. On a machine where the nodes share the cores, the R = 3 / R = 1 throughput ratio
# can be no better than the inverse of the CPU ratio. It ends with each round's R = 3 / R = 1
# ratios and their medians.
#
#   hack/bench-replication-cpu.sh [NARAD_BIN] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(cd "$(dirname "${1:-$root/bin/narad}")" && pwd)/$(basename "${1:-$root/bin/narad}")"
rounds="${2:-2}"
export NARAD_BIN="$bin" NARAD_LOCAL_HTTP_PORT=17942 NARAD_LOCAL_CLUSTER_PORT=17943
lc="$root/hack/local-cluster.sh"
tck="$(getconf CLK_TCK)"
first=http://127.0.0.2:17942
servers=http://127.0.0.2:17942,http://127.0.0.3:17942,http://127.0.0.4:17942

"$lc" clean >/dev/null 2>&1 || true
rows="$(mktemp)"
trap '"$lc" stop >/dev/null 2>&1 || true; "$lc" clean >/dev/null 2>&1 || true; rm -f "$rows"' EXIT
"$lc" start 3 >/dev/null
"$bin" --server "$first" topic add b-r1 --partitions 3 >/dev/null
"$bin" --server "$first" topic add b-r3 --partitions 3 --replication-factor 3 --min-insync 2 >/dev/null
"$lc" settle b-r3 # leaderships taken up and back on their preferred leaders
pids="$(cat "$root"/.narad/cluster/n*/pid)"

ticks() {
  local s=0 p
  for p in $pids; do s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
  echo "$s"
}

echo "| round | mode | topic | full flow msg/s | produce p99 ms | cluster CPU per message |"
echo "|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for mode in single batch; do
    for topic in b-r1 b-r3; do
      if [ "$mode" = single ]; then n="${BENCH_SINGLE_COUNT:-8000}"; extra=(); else n="${BENCH_BATCH_COUNT:-200000}"; extra=(--batch 100); fi
      t0="$(ticks)"
      out="$("$bin" --server "$first" bench "$topic" --servers "$servers" --workers "${BENCH_WORKERS:-8}" --consume --json \
        --count "$n" "${extra[@]}" 2>/dev/null)"
      t1="$(ticks)"
      python3 - "$round" "$mode" "$topic" "$out" "$t0" "$t1" "$tck" "$n" <<'PY'
import json, sys
rnd, mode, topic, out, t0, t1, tck, n = sys.argv[1:]
d = json.loads(out)
cpu = (float(t1) - float(t0)) / float(tck)
print("| %s | %s | %s | %.0f | %.1f | %.0f µs |" % (rnd, mode, topic, d["full_flow_msgs_per_sec"], d["p99_ms"],
      cpu / float(n) * 1e6))
PY
    done
  done
done | tee "$rows"

# The R = 3 / R = 1 ratios of each round (both topics run back to back on the same cluster, so
# a round's ratio is steadier than either rate on a noisy machine), and their median.
python3 - "$rows" <<'PY'
import statistics, sys
rate, cpu = {}, {}
for line in open(sys.argv[1]):
    f = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(f) == 6 and f[0].isdigit():
        rate[(f[0], f[1], f[2])] = float(f[3])
        cpu[(f[0], f[1], f[2])] = float(f[5].split()[0])
for mode in ("single", "batch"):
    rounds = sorted({r for r, m, _ in rate if m == mode}, key=int)
    tp = [rate[(r, mode, "b-r3")] / rate[(r, mode, "b-r1")] for r in rounds if (r, mode, "b-r3") in rate]
    cp = [cpu[(r, mode, "b-r3")] / cpu[(r, mode, "b-r1")] for r in rounds if (r, mode, "b-r3") in cpu]
    if tp:
        print("%s: R3/R1 full flow %s (median %.2f); R3/R1 CPU per message %s (median %.2f)" % (mode,
              " ".join("%.2f" % x for x in tp), statistics.median(tp), " ".join("%.2f" % x for x in cp),
              statistics.median(cp)))
PY
