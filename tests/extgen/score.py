"""The strict scorer of findings against the independent generator's ground truth (truth.json's
faults), used by the diagnose_cases_test (tests/diagnose_cases/run.py) and bench/extgen_sweep.py:
a finding is true only when it names the culprit (the rank; the host for host-level faults) and no
other; a finding on a healthy job, a finding naming anyone else, and a second finding about a fault
already found are false.
"""
KIND = {"straggler": "slow_compute", "late": "slow_compute", "host_slow": "slow_compute",
        "nic": "slow_link", "flap": "slow_link"}
HOST_LEVEL = {"host_slow", "nic", "flap"}


def took_effect(faults):
    """The faults that happened: a flap whose period put no outage inside its window never took
    the link down, so there is nothing to find (a finding about its host is false)."""
    return [t for t in faults if t["kind"] != "flap" or t.get("flap_events_us")]


def score(findings, faults):
    faults = took_effect(faults)
    credited, false = set(), []
    for f in findings:
        if f["kind"] in ("step_regression", "step_jitter"):
            continue  # step-level symptoms name no culprit
        hit = None
        for i, t in enumerate(faults):
            if KIND.get(t["kind"]) != f["kind"] or i in credited:
                continue
            got = set(f.get("hosts") or []) if t["kind"] in HOST_LEVEL else set(f.get("ranks") or [])
            want = set(t["culprit_hosts"]) if t["kind"] in HOST_LEVEL else set(t["culprit_ranks"])
            if got and got <= want:
                hit = i
                break
        if hit is None:
            false.append(f)
        else:
            credited.add(hit)
    missed = [t for i, t in enumerate(faults) if i not in credited]
    return false, missed

