#!/usr/bin/env python3
"""A generality sweep: jobs drawn outside the evaluation suites, scored strictly by `collscope eval`.

The built-in suites draw from one generator (sim/eval/eval.cc): eight shapes, 200 ms dumps, 40
steps. Detector work that passes them can still fail on shapes they never draw. This draws its own:
hosts of 2, 4 or 8 GPUs, TP 1-8, PP 1-8, context and expert parallelism, dumps every 0.2-2 s, noise
up to the suites' highest, GPUs that differ in speed by up to 0.4%, both Inspector flavours; faults
over the whole job or a window, at severities across each detector's limit, one or two at once, and
healthy jobs. It writes the jobs as a suite file (`collscope eval --suite-file`), runs the
evaluation, and prints every job whose fault was missed or that drew a false finding, tier by tier
(and how many of those false findings are symptoms that name no culprit by design: slow_network,
step_regression, step_jitter).

usage: bench/sweep.py [--collscope build/collscope] [--seed N] [--jobs N] [--out DIR] [--max-gpus N]
The same seed draws the same jobs. The suite file and the JSON report stay under --out.
"""
import argparse
import json
import os
import random
import subprocess
import sys


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def draw_shape(r, max_gpus):
    while True:
        gpus = r.choice([2, 4, 8, 8])
        hosts = r.choice([h for h in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) if h * gpus <= max_gpus])
        world = hosts * gpus
        tp = r.choice([d for d in divisors(gpus) if d >= 2] or [1])
        pp = r.choice([p for p in (1, 1, 2, 4, 8) if world % (tp * p) == 0])
        cp = r.choice([1, 1, 1, 2]) if world % (tp * pp * 2) == 0 else 1
        dp = world // (tp * pp * cp)
        ep = r.choice([1, 1] + [e for e in (2, 4) if dp % e == 0])
        if dp >= 1:
            return dict(hosts=hosts, gpus_per_host=gpus, tp=tp, pp=pp, cp=cp, ep=ep)


def draw_job(r, max_gpus, index):
    sh = draw_shape(r, max_gpus)
    steps = r.choice([24, 32, 40, 60])
    layers = max(sh["pp"], r.choice([4, 8]))
    args = dict(sh, layers=layers, hidden=r.choice([2048, 4096, 8192]), seq_len=r.choice([2048, 4096]),
                micro_batches=r.choice([4, 8]), steps=steps,
                dump_interval_us=r.choice([200000, 500000, 1000000, 2000000]),
                compute_sigma=round(r.uniform(0.01, 0.05), 3), comm_sigma=round(r.uniform(0.02, 0.1), 3),
                contention_prob=round(r.uniform(0, 0.3), 3), clock_skew_us=r.randint(100, 3000),
                flavor=r.choice(["2.29", "2.30"]), seed=10000 + index,
                # Healthy GPUs differ in speed (0-0.4%), drawn apart so that the other draws stay
                # those of earlier sweeps of the same seed.
                gpu_speed_sigma=random.Random(index).choice([0, 0.002, 0.004]))
    world = sh["hosts"] * sh["gpus_per_host"]

    def window():
        if r.random() < 0.3:
            return f",start_step=0,end_step={steps}"
        length = r.randint(max(5, steps // 6), steps // 2)
        start = r.randint(0, steps - length)
        return f",start_step={start},end_step={start + length}"

    def host():
        return r.randrange(sh["hosts"])

    makers = {
        "nic_degrade": lambda: f"kind=nic_degrade,host={host()},factor={r.uniform(0.1, 0.6):.3f}" + window(),
        "gpu_straggler": lambda: f"kind=gpu_straggler,rank={r.randrange(world)},factor={r.uniform(1.1, 1.8):.3f}" + window(),
        "host_slowdown": lambda: f"kind=host_slowdown,host={host()},factor={r.uniform(1.1, 1.8):.3f}" + window(),
        "host_stall": lambda: (lambda a: f"kind=host_stall,rank={r.randrange(world)},stall_us={r.randint(300000, 3000000)},"
                                         f"start_step={a},end_step={a + 1}")(r.randint(1, steps - 3)),
        "hang": lambda: f"kind=hang,rank={r.randrange(world)},comm={r.choice(['dp', 'tp'])},start_step={r.randint(2, steps - 2)}",
        "mismatch": lambda: (f"kind=mismatch,rank={r.randrange(world)},comm={r.choice(['dp', 'tp'])},"
                             f"start_step={r.randint(2, steps - 2)},size_factor={r.choice(['2', '0.5'])},effect=complete"),
    }
    if sh["pp"] >= 2:
        makers["pipeline_bubble"] = lambda: (f"kind=pipeline_bubble,stage={r.randrange(sh['pp'] - 1)},"
                                             f"delay_us={r.randint(3000, 20000)}" + window())
    roll = r.random()
    faults = []
    if roll < 0.15:
        name = "healthy"
    else:
        kinds = sorted(makers)
        first = r.choice(kinds)
        faults.append(makers[first]())
        name = first
        if roll > 0.8 and first not in ("hang", "mismatch"):
            second = r.choice([k for k in kinds if k not in ("hang", "mismatch")])
            faults.append(makers[second]())
            name += "+" + second
    if any(f.startswith(("kind=hang", "kind=mismatch")) for f in faults):
        args["hang_timeout_s"] = 30
    tag = f"{world}g-tp{sh['tp']}pp{sh['pp']}cp{sh['cp']}ep{sh['ep']}-d{args['dump_interval_us'] // 1000}ms"
    line = " ".join([f"sweep{index:03d}-{name}-{tag}"] + [f"{k}={v}" for k, v in args.items()] +
                    [f"fault={f}" for f in faults])
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collscope", default="build/collscope")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--max-gpus", type=int, default=256)
    ap.add_argument("--out", default="sweep-out")
    a = ap.parse_args()
    r = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    suite = os.path.join(a.out, f"suite-{a.seed}.txt")
    with open(suite, "w") as f:
        f.write(f"# bench/sweep.py --seed {a.seed} --jobs {a.jobs} --max-gpus {a.max_gpus}\n")
        for i in range(a.jobs):
            f.write(draw_job(r, a.max_gpus, a.seed * 1000 + i) + "\n")
    report = os.path.join(a.out, f"report-{a.seed}.json")
    with open(report, "w") as out:
        rc = subprocess.call([a.collscope, "eval", "--suite-file", suite, "--json", "--work-dir",
                              os.path.join(a.out, "work")], stdout=out)
    if rc != 0:
        sys.exit(f"sweep: collscope eval exited {rc} (suite {suite})")
    rep = json.load(open(report))
    bad = 0
    for s in rep["scenarios"]:
        problems = []
        for tier, t in sorted(s["tiers"].items()):
            missed = s["faults"] - t.get("found", 0)
            if missed > 0 or t.get("false_findings", 0) > 0:
                sym = t.get("false_symptoms", 0)
                labels = s.get("fault_labels", [])
                missed_labels = [labels[j] for j, f in enumerate(t.get("fault_found", [])) if not f and j < len(labels)]
                problems.append(f"{tier}: found {t.get('found', 0)}/{s['faults']}, false {t.get('false_findings', 0)}"
                                + (f" ({sym} naming no culprit)" if sym else "")
                                + "".join(f", missed {m['kind']}"
                                          + (f" at {m['severity']}" if m["severity"] is not None else "")
                                          for m in missed_labels))
        if problems:
            bad += 1
            print(f"{s['name']}: " + "; ".join(problems))
    print(f"sweep seed {a.seed}: {len(rep['scenarios'])} jobs, {bad} with a miss or a false finding in some tier "
          f"(suite {suite}, report {report})")


if __name__ == "__main__":
    main()
