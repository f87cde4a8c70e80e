#!/usr/bin/env python3
"""plan_symmetry.py — how symmetric a simulated plan is, device by device.

Usage: benchmarks/plan_symmetry.py TRACE [LABEL]

TRACE is a Chrome trace written by `simsearch simulate ... --trace TRACE`.
Devices are grouped by their compute stream: by work (the multiset of (op,
kind, duration) of their compute tasks) and by timeline (the same tasks at the
same start times). A simulation of one device per class of identical devices
(DESIGN, "Symmetry") needs identical timelines, so n_devices / (classes by
timeline) bounds what it could save on this plan (docs/experiments.md,
"How much an exact symmetric simulation could save in the search").
"""
import collections
import json
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    label = sys.argv[2] if len(sys.argv) == 3 else sys.argv[1]
    with open(sys.argv[1]) as f:
        events = json.load(f)["traceEvents"]
    compute = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0]
    devices = collections.defaultdict(list)
    for e in compute:
        devices[e["pid"]].append((e["args"]["op"], e["cat"], round(e["dur"], 3), round(e["ts"], 3)))
    work = collections.Counter(tuple(sorted((o, c, d) for o, c, d, _ in v)) for v in devices.values())
    timeline = collections.Counter(tuple(sorted(v)) for v in devices.values())
    print("%s: %d devices, %d compute tasks; classes by work: %d (largest %d), "
          "by timeline: %d (largest %d)" % (label, len(devices), len(compute), len(work),
                                           max(work.values()), len(timeline),
                                           max(timeline.values())))


if __name__ == "__main__":
    main()
