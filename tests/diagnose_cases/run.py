#!/usr/bin/env python3
"""CTest diagnose_cases_test: detector cases as data (Perfetto-style diff tests). Each folder here
is one case:

  case.json      {"why": what it once got wrong or what it pins down,
                  "inputs": {"extgen": [gen.py arguments]}       a job from the independent generator
                          | {"simulate": [collscope simulate arguments],
                             "read": [its output's folders to diagnose; all of it when absent]}
                          | {"fixture": "path under the fixtures folder"},
                  "diagnose": [extra collscope diagnose arguments]}   (optional)
  expected.json  the findings that `collscope diagnose INPUTS --json` must print, each as its kind,
                 detector, root-cause ranks and hosts, and, where the communicator is the answer (a
                 hang, a mismatch), the communicators; in the order printed

A case fails on any difference, shown as a diff. Where the generator wrote its ground truth
(extgen's truth.json), the findings are also scored strictly by tests/extgen/score.py:
every fault found, naming its culprit and no one else, and no other finding. A fixture case is
skipped, saying so, where the fixtures folder ($COLLSCOPE_FIXTURES, else ../shared/fixtures) is
absent.

usage: run.py COLLSCOPE GEN_PY WORK_DIR [--only NAME] [--update]
  --update  rewrites each run case's expected.json with what diagnose printed (review the diff)
"""
import difflib, json, os, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "extgen"))
from score import score  # noqa: E402  the strict scorer, shared with bench/extgen_sweep.py

KEYS = ("kind", "detector", "ranks", "hosts")
WHERE_IS_THE_ANSWER = ("hang", "collective_mismatch")


def fixtures_dir():
    return os.environ.get("COLLSCOPE_FIXTURES") or os.path.join(HERE, "..", "..", "..", "shared", "fixtures")


def make_inputs(collscope, gen, spec, out):
    """Returns (paths to diagnose, ground truth faults or None), or (None, reason) to skip."""
    if "extgen" in spec:
        subprocess.run([sys.executable, gen, *spec["extgen"], "--out", out], check=True, stdout=subprocess.DEVNULL)
        return [os.path.join(out, "logs")], json.load(open(os.path.join(out, "truth.json")))["faults"]
    if "simulate" in spec:
        subprocess.run([collscope, "simulate", *spec["simulate"], "--out", out], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return [os.path.join(out, p) for p in spec.get("read", ["."])], None
    path = os.path.join(fixtures_dir(), spec["fixture"])
    if not os.path.exists(path):
        return None, f"fixture absent: {path}"
    return [path], None


def project(findings):
    out = []
    for f in findings:
        p = {k: f.get(k) or [] if k in ("ranks", "hosts") else f.get(k) for k in KEYS}
        if f["kind"] in WHERE_IS_THE_ANSWER:
            p["comms"] = f.get("comms") or []
        out.append(p)
    return out


def run_case(collscope, gen, work, name, update):
    folder = os.path.join(HERE, name)
    case = json.load(open(os.path.join(folder, "case.json")))
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    paths, truth = make_inputs(collscope, gen, case["inputs"], out)
    if paths is None:
        print(f"skip {name}: {truth}")
        return True
    p = subprocess.run([collscope, "diagnose", *paths, "--json", *case.get("diagnose", [])],
                       capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    if p.returncode not in (0, 1):
        print(f"FAIL {name}: diagnose exited {p.returncode}: {p.stderr[-2000:]}")
        return False
    findings = json.loads(p.stdout)["findings"]
    got = project(findings)
    expected_path = os.path.join(folder, "expected.json")
    if update:
        with open(expected_path, "w") as fh:
            json.dump(got, fh, indent=1)
            fh.write("\n")
    want = json.load(open(expected_path))
    problems = []
    if got != want:
        problems += difflib.unified_diff(json.dumps(want, indent=1).splitlines(), json.dumps(got, indent=1).splitlines(),
                                         "expected.json", "diagnose --json", lineterm="")
    if truth is not None:
        false, missed = score(findings, truth)
        problems += [f"false: {f['kind']} ranks {f.get('ranks', [])[:8]} hosts {f.get('hosts', [])}: {f['summary'][:300]}"
                     for f in false]
        problems += [f"missed: {t['kind']} ranks {t['culprit_ranks'][:8]} hosts {t['culprit_hosts']}" for t in missed]
    print(f"{'FAIL' if problems else 'ok  '} {name} ({time.time() - t0:.1f} s): {case['why']}")
    for line in problems:
        print("     " + line)
    return not problems


def main():
    args = sys.argv[1:]
    update = "--update" in args
    only = args[args.index("--only") + 1] if "--only" in args else None
    collscope, gen, work = [a for a in args if not a.startswith("--") and a != only][:3]
    names = sorted(n for n in os.listdir(HERE) if os.path.isfile(os.path.join(HERE, n, "case.json")))
    if only:
        names = [n for n in names if n == only]
        if not names:
            print(f"no case named {only}")
            return 2
    failed = [n for n in names if not run_case(collscope, gen, work, n, update)]
    print(f"{len(names) - len(failed)} of {len(names)} cases passed" + (": failed " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
