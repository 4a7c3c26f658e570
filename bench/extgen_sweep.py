#!/usr/bin/env python3
"""A generality sweep on the independent generator (tests/extgen/gen.py, written from the format
reference alone, sharing no code with sim/): jobs drawn at random (shape, Inspector flavour, dump
interval, communicator naming, launcher, one or two faults or none, whole-job or windowed, at
severities across each detector's limit), diagnosed from their Inspector logs alone (tier A) and
scored strictly by the CTest's own scorer (tests/extgen/score.py). Prints every job with a miss or
a false finding, then the totals. Same seed, same jobs.

With --baseline OTHER_COLLSCOPE, each job is also diagnosed by that binary (the same logs), and
the jobs it scores differently are printed with both results, then its totals: a change is
judged on the same jobs in the same session.

usage: bench/extgen_sweep.py [--collscope build/collscope] [--baseline BIN] [--seed N] [--jobs M]
                             [--out DIR] [--only NAME_PART]
"""
import argparse, json, os, random, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXTGEN = os.path.join(HERE, "..", "tests", "extgen")
sys.path.insert(0, EXTGEN)
from score import score, took_effect  # noqa: E402  the CTest's strict scorer, not a copy of it

SHAPES = ["tp4pp2dp4", "tp8pp2dp4", "tp8pp4dp4", "tp8pp4dp8ep4"]
STEPS = {"tp4pp2dp4": 40, "tp8pp2dp4": 40, "tp8pp4dp4": 30, "tp8pp4dp8ep4": 10}


def draw_fault(r, steps, kinds):
    kind = r.choice(kinds)
    if r.random() < 0.4:
        window = ""
    else:
        length = r.randint(max(2, steps // 6), max(3, steps // 2))
        start = r.randint(0, steps - length)
        window = f":from={start}:to={start + length}"
    if kind == "straggler":
        return kind, f"straggler:rank=rand:factor={r.uniform(1.03, 1.5):.3f}" + window
    if kind == "late":
        return kind, f"late:rank=rand:delay_us={r.uniform(300, 3000):.0f}" + window
    if kind == "host_slow":
        return kind, f"host_slow:host=rand:factor={r.uniform(1.05, 1.5):.3f}" + window
    if kind == "nic":
        return kind, f"nic:host=rand:frac={r.uniform(0.06, 0.5):.3f}" + window
    return kind, (f"flap:host=rand:period_ms={r.uniform(600, 3000):.0f}:dur_ms={r.uniform(30, 200):.0f}" + window)


def draw_job(r, i):
    shape = r.choice(SHAPES)
    steps = STEPS[shape]
    n = r.choices([0, 1, 2], weights=[1, 5, 2])[0]
    kinds = ["straggler", "late", "host_slow", "nic", "flap"]
    faults = []
    for _ in range(n):
        k, spec = draw_fault(r, steps, kinds)
        kinds.remove(k)  # two faults of one kind could land on one culprit
        faults.append(spec)
    args = ["--shape", shape, "--seed", str(r.randint(1, 10**6)),
            "--flavour", "2.29" if r.random() < 0.2 else "2.30",
            "--dump-interval-us", str(r.choice([200000, 500000, 1000000, 2000000])),
            "--comm-names", r.choice(["auto", "unknown", "named"]),
            "--launcher", r.choice(["auto", "slurm", "torchrun"])]
    name = f"x{i:03d}-{shape}-" + ("+".join(f.split(":")[0] for f in faults) or "healthy")
    return name, args, "+".join(faults) or "healthy"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collscope", default=os.path.join(HERE, "..", "build", "collscope"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--out", default="extgen-sweep")
    ap.add_argument("--baseline", help="another collscope binary to score on the same jobs")
    ap.add_argument("--only", help="run only the drawn jobs whose name contains this (the same draws)")
    a = ap.parse_args()
    r = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    totals = {"jobs": 0, "faults": 0, "found": 0, "false": 0, "bad_jobs": 0}
    base = {"found": 0, "false": 0, "changed_jobs": 0}
    for i in range(a.jobs):
        name, args, fault = draw_job(r, a.seed * 1000 + i)
        if a.only and a.only not in name:
            continue
        out = os.path.join(a.out, name)
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(EXTGEN, "gen.py"), "--fault", fault, "--out", out] + args,
                       check=True, stdout=subprocess.DEVNULL)
        truth = json.load(open(os.path.join(out, "truth.json")))
        false, missed = diagnose_and_score(a.collscope, out, name, truth)
        totals["jobs"] += 1
        happened = len(took_effect(truth["faults"]))
        totals["faults"] += happened
        totals["found"] += happened - len(missed)
        totals["false"] += len(false)
        changed = False
        if a.baseline:
            b_false, b_missed = diagnose_and_score(a.baseline, out, name, truth)
            base["found"] += happened - len(b_missed)
            base["false"] += len(b_false)
            changed = summary(b_false, b_missed) != summary(false, missed)
            base["changed_jobs"] += changed
        if false or missed or changed:
            totals["bad_jobs"] += bool(false or missed)
            print(f"{name} {' '.join(args)} --fault {fault}")
            print_score(false, missed, "    ")
            if changed:
                print("    baseline:")
                print_score(b_false, b_missed, "      ")
        else:
            shutil.rmtree(out, ignore_errors=True)
    print(f"extgen sweep seed {a.seed}: {totals['jobs']} jobs, {totals['faults']} faults, found {totals['found']}, "
          f"{totals['false']} false findings; {totals['bad_jobs']} jobs with a miss or a false finding "
          f"(kept under {a.out})")
    if a.baseline:
        print(f"baseline {a.baseline}: found {base['found']}, {base['false']} false findings; "
              f"{base['changed_jobs']} jobs scored differently")


def diagnose_and_score(collscope, out, name, truth):
    p = subprocess.run([collscope, "diagnose", os.path.join(out, "logs"), "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"{name}: {collscope} diagnose exited {p.returncode}: {p.stderr[-2000:]}")
    return score(json.loads(p.stdout)["findings"], truth["faults"])


def summary(false, missed):
    return ([(f["kind"], f.get("ranks"), f.get("hosts")) for f in false],
            [(t["kind"], t["culprit_ranks"]) for t in missed])


def print_score(false, missed, indent):
    for f in false:
        print(f"{indent}false: {f['kind']} ranks {f.get('ranks', [])[:8]} hosts {f.get('hosts', [])}: "
              f"{f['summary'][:240]}")
    for t in missed:
        print(f"{indent}missed: {t['kind']} {t['severity']} ranks {t['culprit_ranks'][:8]} hosts {t['culprit_hosts']}")


if __name__ == "__main__":
    main()
