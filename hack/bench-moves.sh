#!/usr/bin/env bash
# Move benchmarks (issue 5): copy bandwidth against the disk's sequential write rate, the
# source freeze while its partition is written at 2,000 msg/s, and the time to decommission a
# node holding 1 GiB. Four nodes on loopback (127.0.0.41-44), production timing defaults.
# Prints a markdown section on stdout (hack/bench.sh appends it to docs/benchmarks.md).
# Usage: hack/bench-moves.sh path/to/narad [GiB]
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

# The disk's sequential write rate on the same filesystem (1 GiB, one fdatasync at the end).
seq_mbs="$(dd if=/dev/zero of="$work/dd.tmp" bs=1M count=1024 conv=fdatasync 2>&1 |
  awk '/copied/ { v = $(NF-1); u = $NF; if (u ~ /^GB/) v *= 1000; if (u ~ /^kB/) v /= 1000; printf "%.0f", v }')"
rm -f "$work/dd.tmp"
log "sequential write: ${seq_mbs} MB/s"

export NARAD_CLUSTER_SECRET="bench-moves-$(date +%s)"
urls=()
for i in 1 2 3 4; do
  h="127.0.0.4$i"
  if [ "$i" = 1 ]; then how=(--bootstrap); else how=(--join 127.0.0.41:17943); fi
  "$narad" serve --node-id "n$i" --data-dir "$work/n$i" --http-addr "$h:17942" --cluster-addr "$h:17943" \
    --security-enabled=false --log-format json "${how[@]}" >"$work/n$i.log" 2>&1 &
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
bulk_bytes="$(curl -fsS "http://127.0.0.44:17942/v1/topics/mv-bulk" | python3 -c 'import json,sys; d=json.load(sys.stdin); print([p["size_bytes"] for p in d["partition_stats"] if p["index"]==3][0])')"
log "mv-bulk/3 holds $bulk_bytes bytes"

# 2,000 msg/s into mv-hot/3 for the whole decommission, through the other nodes.
"$narad" bench mv-hot --partition 3 --rate 2000 --count 1000000 --size 1024 --workers 8 --servers "$three" --json \
  >"$work/hot.json" 2>"$work/hot.err" &
hot=$!
pids+=("$hot")
sleep 5

t0="$(date +%s.%N)"
curl -fsS -XPOST "${urls[0]}/v1/cluster/members/n4/decommission" >/dev/null
for _ in $(seq 1 3000); do
  members | python3 -c 'import json,sys; m=[x for x in json.load(sys.stdin)["members"] if x["id"]=="n4"][0]; sys.exit(0 if m["raft_role"]=="none" and m["owned_partitions"]==0 else 1)' && break
  sleep 0.2
done
t1="$(date +%s.%N)"
kill "$hot" 2>/dev/null || true
wait "$hot" 2>/dev/null || true

python3 - "$work" "$t0" "$t1" "$seq_mbs" "$bulk_bytes" "$gib" <<'PY'
import glob, json, statistics, sys
work, t0, t1, seq_mbs, bulk_bytes, gib = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
flips, freezes = {}, {}
for path in glob.glob(work + "/n*.log"):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        key = (r.get("topic"), r.get("partition"))
        if r.get("msg") == "move: flip committed":
            flips[key] = r
        elif r.get("msg") == "handoff freeze ended" and r.get("reason") == "partition closed":
            freezes[key] = r["frozen_for"] / 1e6
bulk = flips.get(("mv-bulk", 3))
hot_freeze = freezes.get(("mv-hot", 3))
print("## Partition moves")
print()
print("Four nodes on loopback (127.0.0.41-44, production timing defaults: controller tick 10 s, move")
print("runner tick 1 s). Node n4 holds partition 3 of `mv-bulk` (filled with %s GiB of 1 KiB records)" % gib)
print("and of `mv-hot`, written at 2,000 msg/s through the other nodes (`narad bench --partition 3 --rate 2000`)")
print("for the whole run; then n4 is decommissioned (`POST /v1/cluster/members/n4/decommission`).")
print()
print("| measure | value |")
print("|---|---|")
print("| disk sequential write (dd 1 GiB, conv=fdatasync) | %.0f MB/s |" % seq_mbs)
if bulk:
    secs = bulk["duration"] / 1e9
    bw = bulk["copied_bytes"] / secs / 1e6
    print("| mv-bulk/3 copied | %.0f MB in %.1f s (worker start to flip) |" % (bulk["copied_bytes"] / 1e6, secs))
    print("| move copy bandwidth | %.0f MB/s = %.0f%% of the disk's sequential write rate |" % (bw, 100 * bw / seq_mbs))
else:
    print("| mv-bulk/3 move | no flip logged |")
print("| decommission of n4 (%.0f MB), POST to removal from Raft | %.1f s |" % (bulk_bytes / 1e6, t1 - t0))
if hot_freeze is not None:
    print("| freeze of mv-hot/3 (written at 2,000 msg/s), arm to flip | %.1f ms |" % hot_freeze)
if freezes:
    v = sorted(freezes.values())
    p99 = v[min(len(v) - 1, int(round(0.99 * (len(v) - 1))))]
    print("| source freezes, all moves of the run (%d) | p50 %.1f ms, p99 %.1f ms, max %.1f ms |" % (len(v), statistics.median(v), p99, v[-1]))
print()
print("Reproduce: `hack/bench-moves.sh bin/narad [GiB]` (part of `make bench`).")
PY
