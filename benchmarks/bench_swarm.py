#!/usr/bin/env python3
"""Swarm benchmark (issue 32; benchmarks/swarm.md): `simsearch swarm` on
topologies/volunteers40.json with ALBERT-large (the bert zoo model at
ALBERT-large's shape, 24 layers, hidden 1024, seq 512, for the compute;
17.7M averaged parameters, as ALBERT shares weights across layers).
Usage: benchmarks/bench_swarm.py BUILD_DIR [OUT_DIR]  (OUT_DIR default
benchmarks/swarm). Prints markdown tables; writes the sub-topologies it
needs to a temporary folder and the plots to OUT_DIR. Every run is seeded:
the tables are the same on every machine (only the wall times differ)."""
import json, os, subprocess, sys, tempfile, time

build = sys.argv[1]
out_dir = sys.argv[2] if len(sys.argv) > 2 else "benchmarks/swarm"
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.join(build, "simsearch")
topo = os.path.join(src, "topologies/volunteers40.json")
MODEL = ["--model", "bert:layers=24,hidden=1024,heads=16,seq=512", "--params", "17700000"]
CHURN = "leave=1,join=2"
tmp = tempfile.mkdtemp()
peers = json.load(open(topo))["peers"]


def sub(name, keep, scale=1.0):
    doc = {"format": "simsearch-topology", "version": 1, "name": name, "peers": []}
    for p in peers:
        if keep(p):
            q = dict(p)
            q["up_mbps"] *= scale
            q["down_mbps"] *= scale
            doc["peers"].append(q)
    path = os.path.join(tmp, name + ".json")
    json.dump(doc, open(path, "w"))
    return path, len(doc["peers"])


def run(topology, *args, target=4096):
    t0 = time.time()
    cmd = [binary, "swarm", *MODEL, "--topology", topology, "--target-batch", str(target),
           "--json", *args]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r["wall"] = time.time() - t0
    return r


def row(label, r):
    missed = sum(1 for p in r["peers"] if p["missed"] > 0)
    util = sum(p["compute_fraction"] for p in r["peers"]) / len(r["peers"])
    return (f"| {label} | {r['samples_per_s']:.1f} | {r['step_time_s']:.1f} | "
            f"{r['averaging']['mean_time_s']:.1f} | {r['rounds']} | {r['aborts']} | "
            f"{r['lost_samples']:.0f} | {missed} | {100 * util:.0f}% | {r['wall']:.2f} |")


HEAD = ("| case | samples/s | s/step | averaging s | rounds | aborted | samples lost | "
        "peers missing rounds | mean compute util | wall s |\n"
        "|---|---|---|---|---|---|---|---|---|---|")

print("### Averaging method, churn, strategy (volunteers40, target 4096, 1 h)\n")
print(HEAD)
for avg in ["lp", "equal", "ring"]:
    for churn in [None, CHURN]:
        args = ["--averaging", avg] + (["--churn", churn] if churn else [])
        if avg == "lp":
            args += ["--plot", os.path.join(out_dir, f"lp{'-churn' if churn else ''}.svg")]
        print(row(f"{avg}{', churn ' + churn if churn else ''}", run(topo, *args)))
for h in [4, 16]:
    for comp in ["none", "int8"]:
        print(row(f"lp, local-sgd:{h}, {comp}",
                  run(topo, "--strategy", f"local-sgd:{h}", "--compress", comp)))
print(row("lp, per-step, fp16", run(topo, "--compress", "fp16")))

print("\n### Which peers reach what throughput (LP, target 4096, no churn)\n")
print(HEAD)
kinds = sorted({p["type"] for p in peers})
for k in kinds:
    path, n = sub("only-" + k, lambda p, k=k: p["type"] == k)
    if not any(p["accepts_connections"] for p in peers if p["type"] == k):
        continue
    print(row(f"{n} x {k} only", run(path)))
path, n = sub("no-cpu", lambda p: p["type"] != "CPU-core")
print(row(f"{n} GPU peers (no CPU-core)", run(path)))
path, n = sub("accepting", lambda p: p["accepts_connections"])
print(row(f"{n} peers accepting connections", run(path)))
path, n = sub("up40", lambda p: p["up_mbps"] >= 40)
print(row(f"{n} peers uploading >= 40 Mb/s", run(path)))
for n in [10, 20, 30, 40]:
    names = {p["name"] for p in peers[:n]}
    path, m = sub(f"first{n}", lambda p: p["name"] in names)
    print(row(f"first {m} peers", run(path)))

print("\n### Bandwidth scaling (all links x s, LP, target 4096)\n")
print(HEAD)
for s in [0.5, 1, 2, 4, 10]:
    path, _ = sub(f"bw{s}", lambda p: True, s)
    print(row(f"bandwidth x {s}", run(path)))

print("\n### Target batch: throughput and slow peers missing rounds (LP, window 5 s)\n")
print("| target | samples/s | s/step | averaging share of step | rounds | CPU-core peers' "
      "rounds missed | K80 peers' rounds missed | wall s |\n|---|---|---|---|---|---|---|---|")
for tb in [512, 1024, 2048, 4096, 8192, 16384, 32768]:
    r = run(topo, target=tb)
    def miss(kind):
        ps = [p for p in r["peers"] if p["device"] == kind]
        tot = sum(p["rounds"] + p["missed"] for p in ps)
        return f"{sum(p['missed'] for p in ps)}/{tot}"
    frac = r["averaging"]["mean_time_s"] / r["step_time_s"] if r["step_time_s"] else 0
    print(f"| {tb} | {r['samples_per_s']:.1f} | {r['step_time_s']:.1f} | {100 * frac:.0f}% | "
          f"{r['rounds']} | {miss('CPU-core')} | {miss('K80')} | {r['wall']:.2f} |")
for w in [0, 30, 150]:
    r = run(topo, "--window", str(w))
    ps = [p for p in r["peers"] if p["device"] == "CPU-core"]
    print(f"\nwindow {w} s, target 4096: {r['samples_per_s']:.1f} samples/s, "
          f"{r['samples'] / max(r['rounds'], 1):.0f} samples per step, CPU-core peers "
          f"missed {sum(p['missed'] for p in ps)} of "
          f"{sum(p['missed'] + p['rounds'] for p in ps)} rounds")
