"""Prints the report of hack/bench-compare.sh from its result lines.

Each line is "BUILD SCENARIO ROUND MSGS_PER_SEC P99_MS CPU_US_PER_MSG GEN_CPU_US_PER_MSG" (BUILD
is A or B; the last is the load generator's CPU, which shares the machine's cores). For
every scenario and figure the report gives each build's median and min-max over the rounds and
the ratio B/A: the median and min-max of the per-round ratios (round r of B over round r of A,
which ran next to each other).

  python3 hack/bench-compare-report.py RESULTS MD LABEL_A LABEL_B ROUNDS LOAD FSYNC CPUCAL CORES KERNEL
"""
import statistics
import sys

SCENARIOS = {
    "p64": "produce only, 64 producers, 1 KiB (`narad bench`)",
    "full64": "full flow, 64 + 64, 1 KiB (`narad bench`)",
    "http32": "full flow, 32 + 32, 100 B (net/http `httpload`)",
    "batch": "full flow, batch 100, 64 + 64, 1 KiB, 8 partitions (`narad bench`)",
}
# (column in a result line, name, format)
FIGURES = [(3, "msg/s", "{:,.0f}"), (4, "p99 ms", "{:,.1f}"), (5, "CPU µs/msg", "{:,.1f}"),
           (6, "generator CPU µs/msg", "{:,.1f}")]


def load(path):
    """Returns {(scenario, build): {round: [fields]}} and the scenarios in run order."""
    runs, order = {}, []
    with open(path) as f:
        for line in f:
            build, scenario, rnd, *figures = line.split()
            runs.setdefault((scenario, build), {})[int(rnd)] = [float(x) for x in figures]
            if scenario not in order:
                order.append(scenario)
    return runs, order


def spread(values, fmt):
    return "{} ({}–{})".format(fmt.format(statistics.median(values)), fmt.format(min(values)), fmt.format(max(values)))


def rows(runs, order):
    """Yields (scenario title, figure, A, B, B/A) as text."""
    for scenario in order:
        a, b = runs.get((scenario, "A"), {}), runs.get((scenario, "B"), {})
        pairs = sorted(set(a) & set(b))
        for col, name, fmt in FIGURES:
            av = [a[r][col - 3] for r in pairs]
            bv = [b[r][col - 3] for r in pairs]
            ratios = [y / x for x, y in zip(av, bv) if x > 0]
            ratio = spread(ratios, "{:.2f}") if ratios else "-"
            yield SCENARIOS.get(scenario, scenario), name, spread(av, fmt), spread(bv, fmt), ratio


def main():
    path, md, label_a, label_b, rounds, load_avg, fsync, cpucal, cores, kernel = sys.argv[1:]
    runs, order = load(path)
    machine = f"{cores} cores, {kernel}; fsync {fsync}; CPU calibration (broker/cmd/cpucal) {cpucal}; load average {load_avg} at start"
    if md == "1":
        print("### A = {}, B = {}".format(label_a.split()[0], " ".join(label_b.split()[:4]) if label_b.startswith("working tree") else label_b.split()[0]))
        print()
        print(f"- A: {label_a}")
        print(f"- B: {label_b}")
        print(f"- Machine: {machine}")
        print(f"- `make bench-compare`, {rounds} rounds, A and B alternating, each run on a fresh single node;")
        print("  generators (`narad bench`, `httpload`) built from the working tree; CPU is the node's utime + stime,")
        print("  generator CPU the generator's (it shares the cores: the rate is bounded by the two together)")
        print()
        print("| scenario | figure | A median (min–max) | B median (min–max) | B / A median (min–max) |")
        print("|---|---|---|---|---|")
        for r in rows(runs, order):
            print("| " + " | ".join(r) + " |")
        return
    print(f"machine: {machine}")
    print(f"A: {label_a}")
    print(f"B: {label_b}")
    print(f"{rounds} rounds, A and B alternating, a fresh node each run; medians with min–max; B/A per round pair")
    print("CPU µs/msg: the node's utime + stime over the messages of the run; generator CPU µs/msg: the")
    print("load generator's, which shares the cores (the rate is bounded by the two together)")
    print()
    fmt = "{:<68} {:<21} {:<26} {:<26} {}"
    print(fmt.format("scenario", "figure", "A", "B", "B/A"))
    for r in rows(runs, order):
        print(fmt.format(*r))


if __name__ == "__main__":
    main()
