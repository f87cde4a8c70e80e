#!/usr/bin/env python3
"""Swarm benchmark (issue 32; benchmarks/swarm.md): `simsearch swarm` on
topologies/volunteers40.json with ALBERT-large (the zoo's albert: 17.8M
parameters averaged, one layer's weights shared by its 24 layers).
Usage: benchmarks/bench_swarm.py BUILD_DIR [OUT_DIR]  (OUT_DIR default
benchmarks/swarm). Prints markdown tables; writes the sub-topologies it
needs to a temporary folder and the plots to OUT_DIR. Every run is seeded:
the tables are the same on every machine (only the CPU times differ)."""
import json, os, resource, subprocess, sys, tempfile

build = sys.argv[1]
out_dir = sys.argv[2] if len(sys.argv) > 2 else "benchmarks/swarm"
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.path.join(build, "simsearch")
topo = os.path.join(src, "topologies/volunteers40.json")
MODEL = ["--model", "albert"]
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


def cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(topology, *args, target=4096):
    t0 = cpu()
    cmd = [binary, "swarm", *MODEL, "--topology", topology, "--target-batch", str(target),
           "--json", *args]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    r["wall"] = cpu() - t0  # CPU seconds (user + sys) of the run
    return r


def whatif(title, plot, *args):
    """A what-if run (lists in --peers / --bandwidth-scale / --target-batch): its table."""
    t0 = cpu()
    cmd = [binary, "swarm", *MODEL, "--topology", topo, "--json",
           "--plot", os.path.join(out_dir, plot), *args]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    print(f"\n### {title}\n\n`simsearch swarm --model albert --topology volunteers40 "
          f"{' '.join(args)}` ({cpu() - t0:.2f} s CPU for {len(r['points'])} points; plot "
          f"`swarm/{plot}`)\n")
    print("| peers | bandwidth x | target | samples/s | s/step | averaging s | rounds | "
          "peers missing rounds | mean compute util |\n|---|---|---|---|---|---|---|---|---|")
    for p in r["points"]:
        if not p["feasible"]:
            print(f"| {p['peers']} | {p['bandwidth_scale']:g} | {p['target_batch']} | "
                  f"infeasible: {p['why']} ||||||")
            continue
        print(f"| {p['peers']} | {p['bandwidth_scale']:g} | {p['target_batch']} | "
              f"{p['samples_per_s']:.1f} | {p['step_time_s']:.1f} | {p['averaging_s']:.1f} | "
              f"{p['rounds']} | {p['peers_missing_rounds']} | {100 * p['compute_util']:.0f}% |")


def row(label, r):
    missed = sum(1 for p in r["peers"] if p["missed"] > 0)
    util = sum(p["compute_fraction"] for p in r["peers"]) / len(r["peers"])
    return (f"| {label} | {r['samples_per_s']:.1f} | {r['step_time_s']:.1f} | "
            f"{r['averaging']['mean_time_s']:.1f} | {r['rounds']} | {r['aborts']} | "
            f"{r['lost_samples']:.0f} | {missed} | {100 * util:.0f}% | {r['wall']:.2f} |")


HEAD = ("| case | samples/s | s/step | averaging s | rounds | aborted | samples lost | "
        "peers missing rounds | mean compute util | CPU s |\n"
        "|---|---|---|---|---|---|---|---|---|---|")

print("### Averaging method, churn, strategy (volunteers40, target 4096, 1 h)\n")
print(HEAD)
for avg in ["lp", "equal", "ring"]:
    for churn in [None, CHURN]:
        args = ["--averaging", avg] + (["--churn", churn] if churn else [])
        if avg == "lp" or churn:
            args += ["--plot", os.path.join(out_dir, f"{avg}{'-churn' if churn else ''}.svg")]
        print(row(f"{avg}{', churn ' + churn if churn else ''}", run(topo, *args)))
for h in [4, 16]:
    for comp in ["none", "int8"]:
        plot = ["--plot", os.path.join(out_dir, "lp-local-sgd16-int8.svg")] if (
            h == 16 and comp == "int8") else []
        print(row(f"lp, local-sgd:{h}, {comp}",
                  run(topo, "--strategy", f"local-sgd:{h}", "--compress", comp, *plot)))
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

whatif("What-if: number of peers (the first K of volunteers40), LP", "whatif-peers.svg",
       "--peers", "5,10,15,20,25,30,35,40", "--target-batch", "4096,16384")
whatif("What-if: bandwidth scaling (every peer's up and down x X), LP",
       "whatif-bandwidth.svg", "--bandwidth-scale", "0.5,1,2,4,10",
       "--target-batch", "4096,16384")
whatif("What-if: target batch, LP", "whatif-target.svg", "--peers", "40",
       "--target-batch", "512,1024,2048,4096,8192,16384,32768")

print("\n### Target batch: throughput and slow peers missing rounds (LP, window 5 s)\n")
print("| target | samples/s | s/step | averaging share of step | rounds | CPU-core peers' "
      "rounds missed | K80 peers' rounds missed | CPU s |\n|---|---|---|---|---|---|---|---|")
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
