#!/usr/bin/env python3
"""plan_swap.py — how the difference between two plans of one model is made up.

Usage: benchmarks/plan_swap.py SIMSEARCH MODEL TOPOLOGY PLAN_A PLAN_B [SIMULATE_ARGS...]

Ops are grouped into classes by name with every step index tN replaced by tN
(the unrolled steps of an RNN layer are one class). For every class in which
the plans differ, PLAN_A with that class's configs taken from PLAN_B is
simulated (`SIMSEARCH simulate --json`, with SIMULATE_ARGS such as `--nodes 1`
when the plans were made with them); then the classes are taken over
cumulatively, the most helpful single swap first. If the cumulative line falls
steadily, PLAN_B is reachable from PLAN_A by single class moves that each
help; if only the last steps fall, the two plans lie in different basins that
a chain crosses only through worse plans (docs/experiments.md, "What the 10 s -> 100 s
gain is made of").
"""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__.strip().splitlines()[2])
    simsearch, model, topo, path_a, path_b = sys.argv[1:6]
    extra = sys.argv[6:]
    a, b = (json.load(open(p)) for p in (path_a, path_b))
    if set(a["operators"]) != set(b["operators"]):
        sys.exit("plan_swap: %s and %s name different operators" % (path_a, path_b))
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)

    def simulate(ops):
        plan = dict(a, operators=ops)
        with open(tmp, "w") as f:
            json.dump(plan, f)
        out = subprocess.run([simsearch, "simulate", "--model", model, "--topology", topo,
                              "--plan", tmp, "--json"] + extra, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("plan_swap: simulate failed: " + out.stderr.strip())
        return json.loads(out.stdout)["iteration_time_ms"]

    def take(ops, cls):
        ops = dict(ops)
        for n in classes[cls]:
            ops[n] = b["operators"][n]
        return ops

    try:
        classes = collections.defaultdict(list)
        for n in a["operators"]:
            classes[re.sub(r"t\d+", "tN", n)].append(n)
        diff = [c for c, ns in classes.items()
                if any(a["operators"][n] != b["operators"][n] for n in ns)]
        ta, tb = simulate(a["operators"]), simulate(b["operators"])
        print("A %.2f ms, B %.2f ms (%+.2f%%), %d classes differ" %
              (ta, tb, 100 * (tb / ta - 1), len(diff)))
        single = []
        for c in diff:
            ops_changed = sum(a["operators"][n] != b["operators"][n] for n in classes[c])
            t = simulate(take(a["operators"], c))
            single.append((t, c))
            print("  A + B's %-28s (%3d ops) %9.2f ms %+6.2f%%" %
                  (c, ops_changed, t, 100 * (t / ta - 1)))
        print("cumulative, most helpful single swap first:")
        ops = a["operators"]
        for t1, c in sorted(single):
            ops = take(ops, c)
            t = simulate(ops)
            print("  + %-28s %9.2f ms %+6.2f%%" % (c, t, 100 * (t / ta - 1)))
    finally:
        os.unlink(tmp)


if __name__ == "__main__":
    main()
