#!/usr/bin/env python3
"""Generate topologies/volunteers40.json: a DeDLOC-like swarm of 40 volunteer
peers with heterogeneous GPUs (or none), asymmetric home links between 10 and
1000 Mb/s, and about 30% of peers behind firewalls or NAT (they can connect
out but accept no incoming connections).

Deterministic: a fixed seed, so re-running reproduces the committed file.
Usage: python3 scripts/gen_volunteers40.py > topologies/volunteers40.json
"""
import random

SEED = 40
N = 40
# Device mix (type, weight): consumer and cloud GPUs, old K80s, CPU-only peers.
MIX = [("T4", 10), ("RTX3090", 10), ("V100-SXM2-16GB", 6), ("K80", 6), ("CPU-core", 8)]
# Download tiers in Mb/s (home DSL/cable/fibre, cloud VMs); upload is a
# fraction of download, as on asymmetric home links, but at least 10 Mb/s.
DOWN = [50, 100, 200, 300, 500, 1000]
UP_FRACTION = [0.1, 0.2, 0.4, 1.0]


def main():
    rng = random.Random(SEED)
    types = [t for t, w in MIX for _ in range(w)]
    rng.shuffle(types)
    firewalled = set(rng.sample(range(N), 12))  # 12 of 40 = 30%
    peers = []
    for i in range(N):
        down = rng.choice(DOWN)
        up = max(10, round(down * rng.choice(UP_FRACTION)))
        latency = round(rng.uniform(5, 60), 1)
        peers.append(
            '    {"name": "peer%02d", "type": "%s", "up_mbps": %d, "down_mbps": %d, '
            '"accepts_connections": %s, "latency_ms": %.1f}'
            % (i, types[i], up, down, "false" if i in firewalled else "true", latency))
    print('{\n  "format": "simsearch-topology",\n  "version": 1,\n  "name": "volunteers40",')
    print('  "peers": [\n' + ",\n".join(peers) + "\n  ]\n}")


if __name__ == "__main__":
    main()
