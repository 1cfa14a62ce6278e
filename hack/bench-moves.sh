#!/usr/bin/env bash
# Move benchmarks: copy bandwidth against the disk's sequential write rate, the
# source freeze while its partition is written at 2,000 msg/s, and the time to decommission a
# node holding 1 GiB. Four nodes on loopback (127.0.0.41-44), production timing defaults.
# Prints a markdown table on stdout (hack/bench.sh appends it to docs/benchmarks.md).
# Usage: hack/bench-moves.sh path/to/narad [GiB]
#   BENCH_MOVE_HOT_RATE=N  msg/s written into mv-hot/3 during the run (default 2000; 0 = none)
#   BENCH_MOVE_HEADER=0    print only the table rows (for a second run under another load)
#   BENCH_PPROF_DIR=dir    CPU profiles of the four nodes during the copy (BENCH_PPROF_SECONDS, 4)
set -euo pipefail
narad="${1:?usage: hack/bench-moves.sh path/to/narad [GiB]}"
gib="${2:-${BENCH_MOVE_GIB:-1}}"
work="$(mktemp -d)"
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
log() { echo "bench-moves: $*" >&2; }

# The disk's sequential write rate on the same filesystem (1 GiB, one fdatasync at the end):
# the median of three runs, since a single run varies severalfold on a shared virtual disk.
dd_once() {
  dd if=/dev/zero of="$work/dd.tmp" bs=1M count=1024 conv=fdatasync 2>&1 |
    awk '/copied/ { printf "%.0f\n", $1 / $(NF-3) / 1e6 }'
  rm -f "$work/dd.tmp"
}
seq_all="$(for _ in 1 2 3; do dd_once; done | sort -n | tr '\n' ' ')"
seq_mbs="$(echo "$seq_all" | awk '{ print $2 }')"
log "sequential write: ${seq_mbs} MB/s (median of ${seq_all})"

export NARAD_CLUSTER_SECRET="bench-moves-$(date +%s)"
urls=()
for i in 1 2 3 4; do
  h="127.0.0.4$i"
  if [ "$i" = 1 ]; then how=(--bootstrap); else how=(--join 127.0.0.41:17943); fi
  "$narad" serve --node-id "n$i" --data-dir "$work/n$i" --http-addr "$h:17942" --cluster-addr "$h:17943" \
    --security-enabled=false --log-format json --pprof-addr "$h:16060" "${how[@]}" >"$work/n$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 150); do
    curl -fsS "http://$h:17942/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS "http://$h:17942/readyz" >/dev/null
  urls+=("http://$h:17942")
done
members() { curl -fsS "${urls[0]}/v1/cluster/members"; }
for _ in $(seq 1 300); do
  [ "$(members | grep -o '"status":"alive"' | wc -l)" = 4 ] && [ "$(members | grep -o '"raft_role":"voter"' | wc -l)" = 3 ] && break
  sleep 0.2
done
export NARAD_ADDR="${urls[0]}"
three="${urls[0]},${urls[1]},${urls[2]}"

# Four partitions over four nodes: partition 3 of each topic lands on n4.
for t in mv-bulk mv-hot; do
  curl -fsS -XPOST "${urls[0]}/v1/topics" -d "{\"name\":\"$t\",\"partitions\":4}" >/dev/null
done
owner3() { curl -fsS "${urls[0]}/v1/topics/$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([p["owner_node"] for p in d["partition_stats"] if p["index"]==3][0])'; }
for _ in $(seq 1 50); do [ "$(owner3 mv-bulk)" = n4 ] && [ "$(owner3 mv-hot)" = n4 ] && break; sleep 0.2; done
[ "$(owner3 mv-bulk)" = n4 ] || { log "placement did not put partition 3 on n4"; exit 1; }

count=$((gib * 1048576))
log "filling mv-bulk/3 on n4 with $count x 1 KiB"
"$narad" bench mv-bulk --partition 3 --count "$count" --size 1024 --workers 32 --batch 100 --servers "$three" --json >"$work/fill.json"
# produce answers 202 once a record is in the accepting node's WAL: wait until every record is
# committed in the partition, so the move copies a partition nobody writes.
p3() { curl -fsS "http://127.0.0.44:17942/v1/topics/mv-bulk" | python3 -c "import json,sys; d=json.load(sys.stdin); print([p['$1'] for p in d['partition_stats'] if p['index']==3][0])"; }
for _ in $(seq 1 1500); do [ "$(p3 high_watermark)" -ge "$count" ] && break; sleep 0.2; done
bulk_bytes="$(curl -fsS "http://127.0.0.44:17942/v1/topics/mv-bulk" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([p["size_bytes"] for p in d["partition_stats"] if p["index"]==3][0])')"
log "mv-bulk/3 holds $bulk_bytes bytes"

# 2,000 msg/s into mv-hot/3 for the whole decommission, through the other nodes.
hot_rate="${BENCH_MOVE_HOT_RATE:-2000}"
hot=""
if [ "$hot_rate" != 0 ]; then
  "$narad" bench mv-hot --partition 3 --rate "$hot_rate" --count 1000000 --size 1024 --workers 8 --servers "$three" --json \
    >"$work/hot.json" 2>"$work/hot.err" &
  hot=$!
  pids+=("$hot")
  sleep 5
fi

# The same dd again with the cluster up, the fill written and the load running, right before
# the copy: the denominator under the conditions the copy itself meets (the copy and dd write
# the same filesystem, and the copy is durable the same way: every segment fdatasynced).
near_all="$(for _ in 1 2 3; do dd_once; done | sort -n | tr '\n' ' ')"
near_mbs="$(echo "$near_all" | awk '{ print $2 }')"
log "sequential write right before the copy: ${near_mbs} MB/s (median of ${near_all})"

t0="$(date +%s.%N)"
curl -fsS -XPOST "${urls[0]}/v1/cluster/members/n4/decommission" >/dev/null
# BENCH_PPROF_DIR=dir: CPU profiles of every node over BENCH_PPROF_SECONDS (default 4) taken
# once mv-bulk/3's copy has started (the controller tick delays it by up to 10 s after the POST).
if [ -n "${BENCH_PPROF_DIR:-}" ]; then
  mkdir -p "$BENCH_PPROF_DIR"
  for _ in $(seq 1 300); do
    curl -fsS "${urls[0]}/v1/cluster/moves?detail=true" | python3 -c 'import json,sys; m=[x for x in json.load(sys.stdin)["moves"] if x["topic"]=="mv-bulk"]; sys.exit(0 if m and m[0].get("detail",{}).get("phase")=="copying" else 1)' && break
    sleep 0.1
  done
  for i in 1 2 3 4; do
    curl -fsS -o "$BENCH_PPROF_DIR/n$i.pprof" "http://127.0.0.4$i:16060/debug/pprof/profile?seconds=${BENCH_PPROF_SECONDS:-4}" &
  done
fi
for _ in $(seq 1 3000); do
  members | python3 -c 'import json,sys; m=[x for x in json.load(sys.stdin)["members"] if x["id"]=="n4"][0]; sys.exit(0 if m["raft_role"]=="none" and m["owned_partitions"]==0 else 1)' && break
  sleep 0.2
done
t1="$(date +%s.%N)"
if [ -n "$hot" ]; then
  kill "$hot" 2>/dev/null || true
  wait "$hot" 2>/dev/null || true
fi

python3 - "$work" "$t0" "$t1" "$seq_mbs" "$bulk_bytes" "$gib" "$hot_rate" "${BENCH_MOVE_HEADER:-1}" "$near_mbs" <<'PY'
import glob, json, statistics, sys
work, t0, t1, seq_mbs, bulk_bytes, gib = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
hot_rate, header, near_mbs = int(sys.argv[7]), sys.argv[8] != "0", float(sys.argv[9])
load = "%s msg/s into mv-hot/3" % format(hot_rate, ",") if hot_rate else "no other load"
flips, freezes, catchups = {}, {}, {}
for path in glob.glob(work + "/n*.log"):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        key = (r.get("topic"), r.get("partition"))
        if r.get("msg") in ("move: catch-up converged", "move: non-converged cutover"):
            catchups[key] = r
        if r.get("msg") == "move: flip committed":
            flips[key] = r
        elif r.get("msg") == "handoff freeze ended" and r.get("reason") == "partition closed":
            freezes[key] = r["frozen_for"] / 1e6
bulk = flips.get(("mv-bulk", 3))
hot_freeze = freezes.get(("mv-hot", 3))
if header:
    print("## Partition moves")
    print()
    print("Four nodes on loopback (127.0.0.41-44, production timing defaults: controller tick 10 s, move")
    print("runner tick 1 s). Node n4 holds partition 3 of `mv-bulk` (filled with %s GiB of 1 KiB records, then left" % gib)
    print("alone) and of `mv-hot`; n4 is then decommissioned (`POST /v1/cluster/members/n4/decommission`) and both")
    print("partitions move off it. Each run is on fresh nodes; \"load\" is what `narad bench --partition 3 --rate N`")
    print("writes into mv-hot/3 through the other nodes for the whole run.")
    print()
    print("| run | measure | value |")
    print("|---|---|---|")
    print("| - | disk sequential write before the nodes start (dd 1 GiB, conv=fdatasync, median of 3) | %.0f MB/s |" % seq_mbs)
cu = catchups.get(("mv-bulk", 3))
if cu:
    secs = cu["copy_duration"] / 1e9
    bw = cu["copied_bytes"] / secs / 1e6
    print("| %s | mv-bulk/3 pre-copy (CatchUp, %d passes) | %.0f MB in %.2f s |" % (load, cu["passes"], cu["copied_bytes"] / 1e6, secs))
    print("| %s | disk sequential write right before the copy, same filesystem (dd as above) | %.0f MB/s |" % (load, near_mbs))
    print("| %s | move copy bandwidth (pre-copy, every sealed segment fdatasynced) | %.0f MB/s = %.0f%% of dd right before the copy (%.0f%% of dd before the nodes started) |" % (load, bw, 100 * bw / near_mbs, 100 * bw / seq_mbs))
if bulk:
    secs = bulk["duration"] / 1e9
    print("| %s | mv-bulk/3 whole move, worker start to flip | %.0f MB in %.1f s |" % (load, bulk["copied_bytes"] / 1e6, secs))
else:
    print("| %s | mv-bulk/3 move | no flip logged |" % load)
print("| %s | decommission of n4 (%.0f MB), POST to removal from Raft | %.1f s |" % (load, bulk_bytes / 1e6, t1 - t0))
if hot_freeze is not None:
    print("| %s | freeze of mv-hot/3, arm to flip | %.1f ms |" % (load, hot_freeze))
if freezes:
    v = sorted(freezes.values())
    p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
    print("| %s | source freezes, all moves of the run (%d) | p50 %.1f ms, p99 %.1f ms, max %.1f ms |" % (load, len(v), statistics.median(v), p99, v[-1]))
PY
