#!/usr/bin/env bash
# Compares two narad builds side by side on this machine: for each round and scenario it starts
# a fresh single dev node from build A, runs `narad bench` against it, stops it, then does the
# same with build B, so both see the same machine noise. Prints produce and full-flow msg/s and
# the broker's own CPU time per message (utime+stime of the node process, from /proc), which
# the load generator sharing the cores does not inflate.
#
#   hack/bench-ab.sh OLD_NARAD NEW_NARAD [ROUNDS]
#
# Scenarios: "p64" (50,000 × 1 KiB produced by 64 producers, 3 partitions), "batch"
# (500,000 × 1 KiB, batches of 100, 64 producers + 64 consumers, 8 partitions) and "flow"
# (30,000 × 1 KiB single-message full flow: produce, consume, ack, 64 + 64, 3 partitions);
# "flow2k" is that flow produced at 2,000 msg/s, so both builds do the same work per second
# and CPU per message is not swayed by how fast each run happened to go. "p1" (5,000 by one
# producer) and "p4" (20,000 by four) are produce at low concurrency, where a request's latency
# sets the rate: they show what a change to group commit costs a lone producer.
# AB_SCENARIOS picks them (default "p64 batch"); AB_HOST the loopback address (default 127.0.0.31).
set -euo pipefail
a="$1"; b="$2"; rounds="${3:-3}"
host="${AB_HOST:-127.0.0.31}"
addr="$host:17942"
tck="$(getconf CLK_TCK)"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one() { # binary label scenario
  local bin="$1" label="$2" scenario="$3" dir out n pid t0 t1
  dir="$(mktemp -d)"
  "$bin" serve --dev --node-id ab --data-dir "$dir/data" --http-addr "$addr" \
    --cluster-addr "$host:17943" --log-level warn >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 150); do curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  t0="$(cpu_ticks "$pid")"
  case "$scenario" in
    p1) n=5000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 3 --count "$n" --size 1024 --workers 1 --json 2>/dev/null)" ;;
    p4) n=20000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 3 --count "$n" --size 1024 --workers 4 --json 2>/dev/null)" ;;
    p64) n=50000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 3 --count "$n" --size 1024 --workers 64 --json 2>/dev/null)" ;;
    batch) n=500000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 8 --count "$n" --size 1024 --workers 64 \
        --consumers 64 --consume --batch 100 --json 2>/dev/null)" ;;
    flow) n=30000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 3 --count "$n" --size 1024 --workers 64 \
        --consumers 64 --consume --json 2>/dev/null)" ;;
    flow2k) n=30000
      out="$("$bin" bench -s "http://$addr" ab --create --partitions 3 --count "$n" --size 1024 --workers 64 \
        --consumers 64 --consume --rate 2000 --json 2>/dev/null)" ;;
  esac
  t1="$(cpu_ticks "$pid")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  python3 - "$label" "$scenario" "$out" "$t0" "$t1" "$tck" "$n" <<'PY'
import json, sys
label, scenario, out, t0, t1, tck, n = sys.argv[1:]
d = json.loads(out)
cpu_us = (float(t1) - float(t0)) / float(tck) / int(n) * 1e6
print(f"{label} {scenario:5} produce {d['produce_msgs_per_sec']:9.0f} msg/s  "
      f"full {d.get('full_flow_msgs_per_sec', 0):9.0f} msg/s  broker cpu {cpu_us:6.1f} µs/msg")
PY
}

for r in $(seq 1 "$rounds"); do
  for scenario in ${AB_SCENARIOS:-p64 batch}; do
    one "$a" A "$scenario"
    one "$b" B "$scenario"
  done
done
