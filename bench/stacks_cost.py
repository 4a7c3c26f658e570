#!/usr/bin/env python3
"""What `collscope stacks` costs the process it samples, as a user runs it.

A Python target (this file, run with --target) does fixed CPU work in a call stack 40 frames deep,
with idle threads beside its main thread as a training process has (data loaders, NCCL's and
CUDA's threads), and counts the work it finishes in a fixed time. It runs alternately alone and
while `collscope stacks --pid P --rate R` samples it for the same time; the slowdown is one minus
the ratio of the medians. Also printed: the sampler's own time per sample (from its JSON), how long
it held the target's threads per sample, and its CPU share of a core.

Usage: bench/stacks_cost.py [--bin build/collscope] [--rate 10] [--seconds 5] [--rounds 5]
       [--threads 16] [--python /usr/bin/python3.11] [--python-only]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time


def target(seconds, threads):
    def idle():
        threading.Event().wait()

    for _ in range(threads):
        threading.Thread(target=idle, daemon=True).start()

    def work(depth):
        if depth:
            return work(depth - 1)
        x = 0
        for i in range(2000):
            x = (x * 31 + i) % 1000003
        return x

    print("ready", flush=True)
    sys.stdin.readline()  # go
    end = time.monotonic() + seconds
    done = 0
    while time.monotonic() < end:
        work(40)
        done += 1
    print(done, flush=True)


def run_once(args, sampled):
    t = subprocess.Popen([args.python, __file__, "--target", "--seconds", str(args.seconds),
                          "--threads", str(args.threads)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert t.stdout.readline().strip() == "ready"
    sampler = None
    if sampled:
        sampler = subprocess.Popen([args.bin, "stacks", "--pid", str(t.pid), "--rate", str(args.rate),
                                    "--duration", str(args.seconds), "--json"] +
                                   (["--no-native"] if args.python_only else []),
                                   stdout=subprocess.PIPE, text=True)
        time.sleep(0.05)  # attached (symbols read) before the work starts
    t.stdin.write("go\n")
    t.stdin.flush()
    done = int(t.stdout.readline())
    t.wait()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the target's time is in from here on
    stats = None
    if sampler:
        out, _ = sampler.communicate()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = json.loads(out)["processes"][0]
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        stats = (p["samples"], p["mean_sample_us"], p["mean_stopped_us"], p["max_stopped_us"], cpu)
    return done, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="store_true")
    ap.add_argument("--bin", default="build/collscope")
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--python-only", action="store_true", help="collscope stacks --no-native")
    args = ap.parse_args()
    if args.target:
        target(args.seconds, args.threads)
        return
    alone, sampled, stats = [], [], []
    for _ in range(args.rounds):
        alone.append(run_once(args, False)[0])
        done, s = run_once(args, True)
        sampled.append(done)
        stats.append(s)
    a, b = statistics.median(alone), statistics.median(sampled)
    samples = sum(s[0] for s in stats)
    print(f"target: {args.python}, main thread busy 40 frames deep, {args.threads} idle threads, "
          f"{args.seconds:g} s a run, {args.rounds} rounds alternating")
    print(f"work alone   (median): {a:.0f} units  {alone}")
    print(f"work sampled (median): {b:.0f} units  {sampled}  at {args.rate:g} Hz")
    print(f"slowdown: {100 * (1 - b / a):.2f}%  (ratio sampled/alone {b / a:.4f})")
    print(f"per sample: {statistics.median(s[1] for s in stats):.0f} us of the sampler's time, "
          f"threads held {statistics.median(s[2] for s in stats):.0f} us "
          f"(worst {max(s[3] for s in stats)} us); {samples} samples")
    print(f"sampler CPU: {100 * statistics.median(s[4] for s in stats) / args.seconds:.2f}% of a core")
    print(f"best of each: alone {max(alone)}, sampled {max(sampled)}: slowdown "
          f"{100 * (1 - max(sampled) / max(alone)):.2f}%")


if __name__ == "__main__":
    main()
