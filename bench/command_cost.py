#!/usr/bin/env python3
"""Whole-command cost of two collscope builds, run alternately on the same inputs.

usage: bench/command_cost.py BASE_BINARY NEW_BINARY [--runs N] [--job DIR]

Times what a user (or a test) runs, start to exit: `diagnose` of a two-rank job (its store in
memory), `ingest` of it into a new store file, and `diagnose` of the bundled example job
(examples/job, or --job). Each command runs N times per binary, the two binaries taking turns so
that a machine's drift hits both alike; prints each binary's median wall time and new/base.
A sanitizer build is measured the same way (ASAN_OPTIONS from the environment).
"""
import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def two_rank_job(dir):
    """Two ranks of one communicator, four AllReduce instances each (Inspector v4.0 lines)."""
    os.makedirs(dir)
    for rank in (0, 1):
        with open(os.path.join(dir, f"node{rank + 1}-pid{rank + 1}.log"), "w") as f:
            for sn in range(1, 5):
                f.write('{"header":{"id":"0xabc","rank":%d,"n_ranks":2,"nnodes":2},"metadata":{'
                        '"inspector_output_format_version":"v4.0","git_rev":"abc","rec_mechanism":'
                        '"nccl_profiler_interface","dump_timestamp_us":1760000000000000,"hostname":'
                        '"node%d","pid":%d},"coll_perf":{"coll":"AllReduce","coll_sn":%d,'
                        '"coll_msg_size_bytes":1048576,"coll_exec_time_us":100,"coll_timing_source":'
                        '"kernel_gpu","coll_algobw_gbs":10.48576,"coll_busbw_gbs":19.6608}}\n'
                        % (rank, rank + 1, rank + 1, sn))


def timed(cmd, env):
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if p.returncode not in (0, 1):  # diagnose exits 1 when it has findings
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--job", default=os.path.join(ROOT, "examples", "job"))
    a = ap.parse_args()
    env = dict(os.environ, COLLSCOPE_DUCKDB_THREADS=os.environ.get("COLLSCOPE_DUCKDB_THREADS", "1"))
    with tempfile.TemporaryDirectory() as tmp:
        tiny = os.path.join(tmp, "two-ranks")
        two_rank_job(tiny)
        commands = {
            "diagnose, two ranks": lambda b, store: [b, "diagnose", tiny],
            "ingest, two ranks, new store": lambda b, store: [b, "ingest", tiny, "--db", store, "-q"],
            "diagnose, " + os.path.relpath(a.job, ROOT): lambda b, store: [b, "diagnose", a.job],
        }
        stores = (os.path.join(tmp, f"{n}.duckdb") for n in itertools.count())
        print(f"base {a.base}\nnew  {a.new}\n{a.runs} runs each, alternating; median wall seconds")
        for name, make in commands.items():
            took = {a.base: [], a.new: []}
            for i in range(a.runs):
                for b in (a.base, a.new) if i % 2 == 0 else (a.new, a.base):
                    took[b].append(timed(make(b, next(stores)), env))
            mb, mn = statistics.median(took[a.base]), statistics.median(took[a.new])
            print(f"{name:40s} base {mb:7.3f}  new {mn:7.3f}  new/base {mn / mb:5.2f}")


if __name__ == "__main__":
    main()
