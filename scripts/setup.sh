#!/usr/bin/env bash
# Install the Debian packages simsearch needs, if any are missing.
# Non-interactive and idempotent: when everything is there it only checks.
set -euo pipefail
# clang-14 + libclang-rt-14-dev: the libFuzzer harnesses (tests/fuzz, make fuzz);
# OpenBLAS: the CPU kernels; Open MPI: the link probes (simsearch probe);
# coinor-libcbc-dev: the sharding ILP (search/ilp.c, COIN-OR CBC's C interface)
# libcairo2-dev: simsearch swarm --plot (SVG / PNG)
# libplplot-dev + plplot-driver-cairo: cli/plot.c, the plotting module (SVG; PNG via pngcairo)
pkgs=(build-essential cmake pkg-config libjansson-dev libcmocka-dev libhwloc-dev clang-14
      libclang-rt-14-dev libopenblas-dev libopenmpi-dev openmpi-bin coinor-libcbc-dev
      libcairo2-dev libplplot-dev plplot-driver-cairo)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
