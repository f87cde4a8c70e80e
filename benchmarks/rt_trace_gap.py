#!/usr/bin/env python3
# rt_trace_gap.py — where a `simsearch run --trace` iteration departs from its prediction.
# Usage: rt_trace_gap.py RUN_TRACE SIM_TRACE [TOP]  (RUN_TRACE: `simsearch run --trace`,
# SIM_TRACE: `simsearch simulate --trace` of the same plan). Invariant: read-only; tasks are
# matched by task id (both traces carry it), the run's own events give the simulated start/duration.
"""Line up a runtime --trace (ranks 0/1) with simulate --trace of the same plan by task id:
per task measured vs predicted start and duration; for comm tasks the wait for the peer
(own start vs the later member's start) and the work after both arrived."""
import json, sys, collections
run = json.load(open(sys.argv[1]))
sim = json.load(open(sys.argv[2]))
sim = sim['traceEvents'] if isinstance(sim, dict) else sim
top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
simt = {}
for e in sim:
    if e.get('ph') == 'X':
        t = e['args']['task']
        simt.setdefault((e['pid'], t), (e['ts'], e['dur'], e['name']))
by = collections.defaultdict(dict)  # task -> rank -> event
for e in run:
    by[e['args']['task']][e['pid']] = e
ranks = sorted({e['pid'] for e in run})
rows = []
for t, m in by.items():
    starts = [m[r]['ts'] for r in m]
    for r, e in m.items():
        st, du = e['ts'], e['dur']
        late = max(starts) if e['cat'] in ('xfer', 'collective') and len(m) > 1 else st
        wait = late - st
        work = du - wait
        s = simt.get((r, t))
        rows.append(dict(rank=r, task=t, name=e['name'], cat=e['cat'], ts=st, dur=du, wait=wait,
                         work=work, sts=e['args']['sim_ts'], sdur=e['args']['sim_dur'],
                         simfile=s, bytes=e['args']['bytes']))
for r in ranks:
    rr = sorted([x for x in rows if x['rank'] == r], key=lambda x: x['ts'])
    end = max(x['ts'] + x['dur'] for x in rr)
    busy = sum(x['dur'] for x in rr)
    gaps = []
    prev = 0.0
    for x in rr:
        if x['ts'] - prev > 50: gaps.append((x['ts'] - prev, prev, x['name']))
        prev = max(prev, x['ts'] + x['dur'])
    print(f"== rank {r}: first task at {rr[0]['ts']/1e3:.2f} ms, last end {end/1e3:.2f} ms, sum of task durations {busy/1e3:.2f} ms, gaps>50us {sum(g[0] for g in gaps)/1e3:.2f} ms")
    for g in sorted(gaps, reverse=True)[:5]:
        print(f"   gap {g[0]/1e3:7.2f} ms after {g[1]/1e3:7.2f} before '{g[2]}'")
    cls = collections.defaultdict(lambda: [0, 0., 0., 0., 0., 0])
    for x in rr:
        c = cls[x['cat']]
        c[0] += 1; c[1] += x['dur']; c[2] += x['wait']; c[3] += x['work']; c[4] += x['sdur']; c[5] += x['bytes']
    for k, c in cls.items():
        print(f"   {k:10s} n={c[0]:3d} measured {c[1]/1e3:7.2f} ms = wait {c[2]/1e3:7.2f} + work {c[3]/1e3:7.2f}; predicted {c[4]/1e3:7.2f} ms; bytes {c[5]/1e6:.2f} MB")
    cm = [x for x in rr if x['cat'] in ('xfer', 'collective')]
    print(f"   top {top} comm tasks by work (after both ranks arrived):")
    for x in sorted(cm, key=lambda x: -x['work'])[:top]:
        print(f"   {x['name'][:48]:48s} B={x['bytes']:9.0f} start {x['ts']/1e3:7.2f} (sim {x['sts']/1e3:7.2f}) dur {x['dur']/1e3:6.2f} wait {x['wait']/1e3:6.2f} work {x['work']/1e3:6.2f} pred {x['sdur']/1e3:6.3f}")
    print(f"   top {top} comm tasks by wait:")
    for x in sorted(cm, key=lambda x: -x['wait'])[:top]:
        print(f"   {x['name'][:48]:48s} B={x['bytes']:9.0f} start {x['ts']/1e3:7.2f} (sim {x['sts']/1e3:7.2f}) dur {x['dur']/1e3:6.2f} wait {x['wait']/1e3:6.2f} work {x['work']/1e3:6.2f} pred {x['sdur']/1e3:6.3f}")
# executed order vs simulated order, per rank (the runtime sorts its tasks by simulated start)
for r in ranks:
    rr = sorted([x for x in rows if x['rank'] == r], key=lambda x: x['ts'])
    inv = sum(1 for a, b in zip(rr, rr[1:]) if b['sts'] < a['sts'] - 1e-6)
    print(f"== rank {r}: {inv} of {len(rr) - 1} consecutive executed pairs run against the simulated start order")
