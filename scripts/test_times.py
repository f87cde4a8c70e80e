#!/usr/bin/env python3
"""test_times.py - CPU seconds (user+sys) of each ctest of a build tree.

Role: measures where `make test`'s time goes on a shared machine, where
wall times say more about the other users than about the tests. Each test is
run as ctest would (its command, environment and working directory, taken
from `ctest --show-only=json-v1`), and its CPU time is read from the kernel's
accounting of the test process and every child it waited for (os.wait4).
Invariant: a test's status is reported as ctest would judge it (exit 0 passes,
its SKIP_RETURN_CODE skips, anything else or a timeout fails), so a run of
this script is also a run of the suite; it exits non-zero when a test failed.

Usage: scripts/test_times.py BUILD_DIR [-j N] [-R REGEX] [-E REGEX] [--top N]
       [--env NAME=VALUE ...]
-j runs N tests at a time (CPU time per test does not depend on it); --env
adds to every test's environment (the ASan step's ASAN_OPTIONS, say).
Prints one line per test, "cpu_s wall_s status name", sorted by CPU time,
then the totals.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time


def load_tests(build, include, exclude):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                         capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        name = t["name"]
        if include and not re.search(include, name):
            continue
        if exclude and re.search(exclude, name):
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if props.get("DISABLED"):
            continue
        tests.append({"name": name, "command": t["command"],
                      "env": props.get("ENVIRONMENT", []),
                      "cwd": props.get("WORKING_DIRECTORY", build),
                      "timeout": float(props.get("TIMEOUT", 1500)),
                      "skip": props.get("SKIP_RETURN_CODE")})
    return tests


def run_one(t, extra_env):
    env = dict(os.environ)
    for kv in list(extra_env) + list(t["env"]):
        k, _, v = kv.partition("=")
        env[k] = v
    t0 = time.monotonic()
    p = subprocess.Popen(t["command"], cwd=t["cwd"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    timer = threading.Timer(t["timeout"], lambda: os.killpg(p.pid, 9))
    timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel()
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        verdict = "pass"
    elif t["skip"] is not None and code == int(t["skip"]):
        verdict = "skip"
    elif code == -9 and wall >= t["timeout"]:
        verdict = "TIMEOUT"
    else:
        verdict = "FAIL(%d)" % code
    return ru.ru_utime + ru.ru_stime, wall, verdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("-j", type=int, default=1)
    ap.add_argument("-R", dest="include")
    ap.add_argument("-E", dest="exclude")
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--env", action="append", default=[])
    a = ap.parse_args()
    tests = load_tests(a.build, a.include, a.exclude)
    if not tests:
        sys.exit("test_times.py: no tests in %s" % a.build)
    results = []
    lock = threading.Lock()
    queue = list(tests)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                t = queue.pop(0)
            cpu, wall, verdict = run_one(t, a.env)
            with lock:
                results.append((cpu, wall, verdict, t["name"]))
                print("%8.2f %8.2f %-8s %s" % (cpu, wall, verdict, t["name"]),
                      file=sys.stderr, flush=True)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(max(1, a.j))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    results.sort(reverse=True)
    shown = results[:a.top] if a.top else results
    for cpu, wall, verdict, name in shown:
        print("%8.2f %8.2f %-8s %s" % (cpu, wall, verdict, name))
    failed = [r for r in results if r[2] not in ("pass", "skip")]
    print("total: %d tests, %.1f CPU s, %.1f s wall (-j%d), %d failed"
          % (len(results), sum(r[0] for r in results), time.monotonic() - t0, a.j,
             len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
