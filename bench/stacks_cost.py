#!/usr/bin/env python3
"""What `collscope stacks` costs the process it samples, as a user runs it.

A Python target (this file, run with --target) does fixed CPU work in a call stack 40 frames deep,
with idle threads beside its main thread as a training process has (data loaders, NCCL's and
CUDA's threads), and counts the work it finishes in a fixed time. It runs alternately alone and
while `collscope stacks --pid P --rate R` samples it for the same time; the slowdown is one minus
the ratio of the medians. Also printed: the sampler's own time per sample (from its JSON), how long
it held the target's threads per sample, and its CPU share of a core.

With --steps-ms N the target also writes the annotation API's step file, a step every N ms, and
as many rounds again sample it twice each, writing stack files (--out, 1 s windows): once with
windows by time and once with --steps-dir (windows end at its steps, read as the file grows), so
that what step windows cost is a ratio against the same sampler without them, in the same session.

Usage: bench/stacks_cost.py [--bin build/collscope] [--rate 10] [--seconds 5] [--rounds 5]
       [--threads 16] [--python /usr/bin/python3.11] [--python-only] [--steps-ms 100]
"""
import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def target(seconds, threads, steps_dir, steps_ms):
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

    steps = None
    if steps_dir:  # the annotation API's step file, as the training loop writes it
        steps = open(os.path.join(steps_dir, "%s-pid%d.steps.jsonl" % (os.uname().nodename, os.getpid())), "a")
        steps.write('{"collscope_steps_version":1,"type":"process","hostname":"%s","pid":%d,"rank":0,'
                    '"world_size":1}\n' % (os.uname().nodename, os.getpid()))
        steps.flush()
    print("ready", flush=True)
    sys.stdin.readline()  # go
    end = time.monotonic() + seconds
    done = step = 0
    step_start = time.time()
    while time.monotonic() < end:
        work(40)
        done += 1
        if steps and (time.time() - step_start) * 1000 >= steps_ms:
            now = time.time()
            steps.write('{"type":"step","rank":-1,"step":%d,"start_us":%d,"wall_us":%d,"phases":[]}\n'
                        % (step, step_start * 1e6, (now - step_start) * 1e6))
            steps.flush()
            step, step_start = step + 1, now
    print(done, flush=True)


def run_once(args, sampled, windows=None):
    """windows: None (no stack files), "time" or "steps" (stack files, windows by time or by step)."""
    tmp = tempfile.mkdtemp(prefix="stacks_cost.")
    t = subprocess.Popen([args.python, __file__, "--target", "--seconds", str(args.seconds),
                          "--threads", str(args.threads)] +
                         (["--steps-dir", tmp, "--steps-ms", str(args.steps_ms)] if args.steps_ms else []),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert t.stdout.readline().strip() == "ready"
    sampler = None
    if sampled:
        sampler = subprocess.Popen([args.bin, "stacks", "--pid", str(t.pid), "--rate", str(args.rate),
                                    "--duration", str(args.seconds), "--json"] +
                                   (["--no-native"] if args.python_only else []) +
                                   (["--out", tmp, "--window", "1"] if windows else []) +
                                   (["--steps-dir", tmp] if windows == "steps" else []),
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
        if windows == "steps":  # the stack file's windows must name steps, or nothing was measured
            with open(glob.glob(os.path.join(tmp, "*.stacks.jsonl"))[0]) as f:
                assert any('"step_first"' in line for line in f), "no step window in the stack file"
    shutil.rmtree(tmp)
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
    ap.add_argument("--steps-ms", type=int, default=0, help="the target writes a step file; compare step windows")
    ap.add_argument("--steps-dir", default="")  # the target's (set by run_once)
    args = ap.parse_args()
    if args.target:
        target(args.seconds, args.threads, args.steps_dir, args.steps_ms)
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
    if not args.steps_ms:
        return
    by = {"time": ([], []), "steps": ([], [])}
    for _ in range(args.rounds):
        for w in ("time", "steps"):
            done, s = run_once(args, True, w)
            by[w][0].append(done)
            by[w][1].append(s[4])
    print(f"stack files, 1 s windows, a step every {args.steps_ms} ms:")
    for w in ("time", "steps"):
        work, cpu = by[w]
        print(f"  windows by {w:5s}: work {statistics.median(work):.0f} units (slowdown "
              f"{100 * (1 - statistics.median(work) / a):.2f}%), sampler CPU "
              f"{100 * statistics.median(cpu) / args.seconds:.2f}% of a core")
    print(f"step windows' sampler CPU / time windows': "
          f"{statistics.median(by['steps'][1]) / statistics.median(by['time'][1]):.3f}")


if __name__ == "__main__":
    main()
