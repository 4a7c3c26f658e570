#!/usr/bin/env python3
"""A small PyTorch-style training loop annotated with collscope's step/phase API.

It runs on a CPU without torch: each phase does a fixed amount of busy work (with torch present
and a GPU available it times the phases on the GPU too). To show a diagnosis, one rank can be
slowed in one phase from a given step:

    PYTHONPATH=build/python python3 examples/annotate/train.py --ranks 4 --steps 40 \\
        --slow-rank 2 --slow-phase backward --slow-from 20 --dump-dir /tmp/annotated
    build/collscope diagnose /tmp/annotated

Every rank is its own process (as under torchrun), given RANK and WORLD_SIZE.
"""

import argparse
import os
import subprocess
import sys
import time

import collscope

try:
    from collscope.torch_timing import GpuPhaseTimer
except Exception:  # pragma: no cover
    GpuPhaseTimer = None


def work(seconds, gpu=False, sleep=False):
    """Busy work standing in for a phase's kernels (sleep would hide a slow CPU). With --gpu it is
    a GPU kernel that spins for about that long (torch.cuda._sleep), queued without waiting."""
    if gpu:
        import torch
        torch.cuda._sleep(int(seconds * 1.4e9))  # cycles, at about 1.4 GHz
        return 0
    if sleep:
        time.sleep(seconds)
        return 0
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def train(args):
    rank = int(os.environ.get("RANK", "0"))
    if args.gpu:
        import torch
        torch.cuda.set_device(0)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    collscope.set_parallel(rank=rank, world_size=world, dp=(rank, world))
    timer = GpuPhaseTimer() if GpuPhaseTimer else None
    phase = timer.phase if timer else collscope.phase
    base = {"data": 0.002, "forward": 0.010, "backward": 0.020, "optimizer": 0.004}
    for n in range(args.steps):
        with collscope.step(n):
            for mb in range(args.micro_batches):
                collscope.micro_batch(mb)
                for name in ("data", "forward", "backward"):
                    t = base[name] / args.micro_batches
                    if rank == args.slow_rank and name == args.slow_phase and n >= args.slow_from:
                        t *= args.slow_factor
                    with phase(name):
                        work(t, args.gpu and name != "data", args.sleep)
            with phase("optimizer"):
                work(base["optimizer"], args.gpu, args.sleep)
        if timer:
            timer.step_done(n)
    collscope.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1, help="processes to start (each one rank)")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--micro-batches", type=int, default=2)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-phase", default="backward")
    p.add_argument("--slow-from", type=int, default=0, help="first slowed step")
    p.add_argument("--slow-factor", type=float, default=2.0)
    p.add_argument("--dump-dir", default=None, help="COLLSCOPE_DUMP_DIR for the ranks")
    p.add_argument("--gpu", action="store_true", help="phases run GPU kernels (needs torch with CUDA); "
                   "GPU time per phase is measured with CUDA events")
    p.add_argument("--sleep", action="store_true",
                   help="phases sleep instead of busy-waiting (steady timings on a loaded machine)")
    p.add_argument("--sequential", action="store_true",
                   help="run the ranks one after another (they do not communicate)")
    p.add_argument("--as-rank", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.as_rank:
        train(args)
        return 0
    env = dict(os.environ)
    if args.dump_dir:
        env["COLLSCOPE_DUMP_DIR"] = args.dump_dir
    procs, rc = [], 0
    for r in range(args.ranks):
        e = dict(env, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--as-rank"] + sys.argv[1:], env=e))
        if args.sequential:
            rc = max(rc, procs.pop().wait())
    return max([rc] + [p.wait() for p in procs])


if __name__ == "__main__":
    sys.exit(main())
