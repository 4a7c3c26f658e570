#!/usr/bin/env python3
"""Independent NCCL Inspector log generator (Megatron-style training job).

Writes one job per invocation:
    python3 gen.py --shape NAME --fault SPEC --seed N --steps S --out DIR

DIR/logs/<hostname>-pid<PID>.log   Inspector JSON-lines, one file per process
DIR/truth.json                     ground truth + job layout

Standard library only.  See README.md for the model.
"""
import argparse
import bisect
import hashlib
import json
import math
import os
import random
import sys
import time

# ----------------------------------------------------------------------------
# Shapes
# ----------------------------------------------------------------------------
# layers: transformer layers per pipeline stage; mb: micro-batches per step;
# moe_layers: which local layer indices have an MoE MLP (EP all-to-all);
# fwd_ms: forward compute of one dense layer for one micro-batch (bwd = 2x).
SHAPES = {
    "tp8pp4dp4": dict(tp=8, pp=4, dp=4, ep=1, layers=2, mb=8, moe_layers=(),
                      hidden=8192, seq=8192, fwd_ms=4.0, steps=30),
    "tp8pp4dp8ep4": dict(tp=8, pp=4, dp=8, ep=4, layers=2, mb=4, moe_layers=(1,),
                         hidden=8192, seq=8192, fwd_ms=4.0, steps=10),
    "tp4pp2dp4": dict(tp=4, pp=2, dp=4, ep=1, layers=4, mb=8, moe_layers=(),
                      hidden=5120, seq=4096, fwd_ms=2.2, steps=40),
    "tp8pp2dp4": dict(tp=8, pp=2, dp=4, ep=1, layers=2, mb=8, moe_layers=(),
                      hidden=8192, seq=8192, fwd_ms=4.0, steps=40),
}
GPUS_PER_HOST = 8

# Hardware (per GPU)
NVL_BUSBW = 360e9        # B/s, intra-host collective bus bandwidth
NVL_P2P_BW = 150e9       # B/s, intra-host send/recv
NIC_BW = 46e9            # B/s, achievable per-GPU rail (400 Gb/s NIC)
SELF_COPY_BW = 1200e9    # B/s, send/recv to self (local copy)
MIN_SIZE = 8192          # NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES default
RING_SIZE = 1024         # NCCL_INSPECTOR_DUMP_{COLL,P2P}_RING_SIZE default

SIG_COMPUTE = 0.03       # relative compute jitter
SIG_COMM = 0.07          # relative (lognormal) comm jitter
SIG_GPU_STATIC = 0.004   # persistent per-GPU speed spread
SIG_NIC_STATIC = 0.01    # persistent per-host NIC spread
HICCUP_P = 0.003         # per rank per step probability of a CPU stall
FLAP_DEPTH = 0.002       # NIC bandwidth fraction during a flap

FUNCS = ["AllReduce", "AllGather", "ReduceScatter"]
AR, AG, RS = 0, 1, 2
BUSF = {AR: lambda n: 2.0 * (n - 1) / n, AG: lambda n: (n - 1) / n,
        RS: lambda n: (n - 1) / n}


# ----------------------------------------------------------------------------
# Fault spec
# ----------------------------------------------------------------------------
FAULT_KEYS = {
    "healthy": {},
    "straggler": {"rank": None, "factor": 1.3, "from": 0, "to": "end"},
    "host_slow": {"host": None, "factor": 1.2, "from": 0, "to": "end"},
    "nic": {"host": None, "frac": 0.3, "from": 0, "to": "end"},
    "flap": {"host": None, "period_ms": 1500.0, "dur_ms": 60.0, "from": 0, "to": "end"},
    "late": {"rank": None, "delay_us": 1000.0, "from": 0, "to": "end"},
}


def parse_faults(spec, steps, world, nhosts, rng):
    faults = []
    for part in spec.split("+"):
        part = part.strip()
        if not part:
            continue
        toks = part.split(":")
        kind = toks[0]
        if kind not in FAULT_KEYS:
            sys.exit("unknown fault kind %r (known: %s)" % (kind, ", ".join(FAULT_KEYS)))
        if kind == "healthy":
            continue
        f = dict(FAULT_KEYS[kind])
        for t in toks[1:]:
            if "=" not in t:
                sys.exit("bad fault token %r" % t)
            k, v = t.split("=", 1)
            if k not in f:
                sys.exit("fault %s has no key %r (keys: %s)" % (kind, k, ", ".join(f)))
            f[k] = v
        f["kind"] = kind
        for k in ("rank", "host"):
            if k in f:
                lim = world if k == "rank" else nhosts
                if f[k] in (None, "rand"):
                    f[k] = rng.randrange(lim)
                f[k] = int(f[k])
                if not 0 <= f[k] < lim:
                    sys.exit("%s=%d out of range [0,%d)" % (k, f[k], lim))
        for k in ("factor", "frac", "period_ms", "dur_ms", "delay_us"):
            if k in f:
                f[k] = float(f[k])
        f["from"] = int(f["from"])
        f["to"] = steps if f["to"] in ("end", None) else int(f["to"])
        if not 0 <= f["from"] < f["to"] <= steps:
            sys.exit("bad window from=%s to=%s (steps=%d)" % (f["from"], f["to"], steps))
        faults.append(f)
    return faults


# ----------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------
class Comm:
    __slots__ = ("idx", "kind", "name", "members", "hosts", "nnodes", "n", "hash",
                 "rank_of", "label")

    def __init__(self, idx, kind, label, members, host_of):
        self.idx = idx
        self.kind = kind
        self.label = label
        self.members = members
        self.n = len(members)
        self.hosts = sorted(set(host_of[m] for m in members))
        self.nnodes = len(self.hosts)
        self.rank_of = {m: i for i, m in enumerate(members)}
        self.hash = None
        self.name = None


def build_layout(sh, rng, launcher):
    TP, PP, DP, EP = sh["tp"], sh["pp"], sh["dp"], sh["ep"]
    W = TP * PP * DP
    nh = W // GPUS_PER_HOST
    # Megatron order tp-(cp)-ep-dp-pp: rank = tp + TP*(dp + DP*pp)
    coords = []
    for r in range(W):
        coords.append((r % TP, (r // TP) % DP, r // (TP * DP)))  # tp, dp, pp
    # node placement: node_rank = r // 8.  Hostnames: a cluster naming scheme.
    style = rng.randrange(3)
    rack_nums = rng.sample(range(1, 40), (nh + 15) // 16 + 1)
    names = []
    for i in range(nh * 3):
        rack = rack_nums[(i // 16) % len(rack_nums)]
        slot = 1 + (i % 16)
        if style == 0:
            names.append("gpu-r%02d-n%02d" % (rack, slot))
        elif style == 1:
            names.append("h100-%03d-%03d.cluster.internal" % (rack, slot))
        else:
            names.append("node%04d" % (rack * 100 + slot))
    names = rng.sample(sorted(set(names)), nh)
    if launcher == "slurm":
        names.sort()            # SLURM hands out node ranks in nodelist order
    host_of = [r // GPUS_PER_HOST for r in range(W)]
    return W, nh, coords, names, host_of


def build_comms(sh, W, coords, host_of, rng, comm_names):
    TP, PP, DP, EP = sh["tp"], sh["pp"], sh["dp"], sh["ep"]
    comms = []
    rank_comms = [dict() for _ in range(W)]

    def add(kind, label, members):
        c = Comm(len(comms), kind, label, members, host_of)
        comms.append(c)
        for m in members:
            rank_comms[m][kind] = c.idx
        return c

    def R(tp, dp, pp):
        return tp + TP * (dp + DP * pp)

    add("world", "world", list(range(W)))
    for pp in range(PP):
        for tp in range(TP):
            add("dp", "dp-pp%d-tp%d" % (pp, tp), [R(tp, d, pp) for d in range(DP)])
    for dp in range(DP):   # model-parallel group (TP x PP) - grad norm etc.
        add("mp", "mp-dp%d" % dp, sorted(R(t, dp, p) for p in range(PP) for t in range(TP)))
    for pp in range(PP):
        for dp in range(DP):
            add("tp", "tp-pp%d-dp%d" % (pp, dp), [R(t, dp, pp) for t in range(TP)])
    for dp in range(DP):
        for tp in range(TP):
            add("pp", "pp-dp%d-tp%d" % (dp, tp), [R(tp, dp, p) for p in range(PP)])
    if EP > 1:
        for pp in range(PP):
            for tp in range(TP):
                for g in range(DP // EP):
                    add("ep", "ep-pp%d-tp%d-g%d" % (pp, tp, g),
                        [R(tp, g * EP + e, pp) for e in range(EP)])
        if DP // EP > 1:
            for pp in range(PP):
                for tp in range(TP):
                    for e in range(EP):
                        add("edp", "edp-pp%d-tp%d-e%d" % (pp, tp, e),
                            [R(tp, g * EP + e, pp) for g in range(DP // EP)])
    used = set()
    pgdesc = {"world": "default_pg", "dp": "DATA_PARALLEL_GROUP",
              "mp": "MODEL_PARALLEL_GROUP", "tp": "TENSOR_MODEL_PARALLEL_GROUP",
              "pp": "PIPELINE_MODEL_PARALLEL_GROUP", "ep": "EXPERT_MODEL_PARALLEL_GROUP",
              "edp": "EXPERT_DATA_PARALLEL_GROUP"}
    for c in comms:
        while True:
            h = rng.getrandbits(64)
            if h >> 40 and h not in used:
                break
        used.add(h)
        c.hash = "0x%x" % h
        c.name = pgdesc[c.kind] if comm_names == "named" else "unknown"
    return comms, rank_comms


# ----------------------------------------------------------------------------
# Simulation
# ----------------------------------------------------------------------------
def seeded(*key):
    h = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(h, "little"))


class Sim:
    def __init__(self, sh, steps, seed, W, nh, coords, host_of, comms, rank_comms,
                 faults, train_start_us):
        self.sh, self.steps, self.seed, self.W = sh, steps, seed, W
        self.coords, self.host_of = coords, host_of
        self.comms, self.rank_comms = comms, rank_comms
        self.faults = faults
        self.t0 = train_start_us
        srng = seeded(seed, "static")
        self.gpu_speed = [1.0 + srng.gauss(0, SIG_GPU_STATIC) for _ in range(W)]
        self.nic_nominal = [NIC_BW * (1.0 + srng.gauss(0, SIG_NIC_STATIC)) for _ in range(nh)]
        # flap phases
        for f in faults:
            if f["kind"] == "flap":
                f["phase_us"] = self.t0 + seeded(seed, "flap", f["host"]).uniform(0, f["period_ms"] * 1000)
        self.flaps = [f for f in faults if f["kind"] == "flap"]
        self.a2a_self = False

    # ---- fault helpers
    def compute_factor(self, r, step):
        x = 1.0
        for f in self.faults:
            if not f["from"] <= step < f["to"]:
                continue
            if f["kind"] == "straggler" and f["rank"] == r:
                x *= f["factor"]
            elif f["kind"] == "host_slow" and f["host"] == self.host_of[r]:
                x *= f["factor"]
        return x

    def late_delay(self, r, step):
        d = 0.0
        for f in self.faults:
            if f["kind"] == "late" and f["rank"] == r and f["from"] <= step < f["to"]:
                d += f["delay_us"]
        return d

    def nic_bw(self, h, step):
        b = self.nic_nominal[h]
        for f in self.faults:
            if f["kind"] == "nic" and f["host"] == h and f["from"] <= step < f["to"]:
                b *= f["frac"]
        return b

    def stretch(self, t0, dur, hosts, step, bw_static):
        """Duration of a transfer that needs `dur` us at bw_static, starting at t0,
        when flapping NICs among `hosts` drop to FLAP_DEPTH of nominal."""
        fl = [f for f in self.flaps if f["host"] in hosts and f["from"] <= step < f["to"]]
        if not fl or dur <= 0:
            return dur
        t, rem = t0, dur
        for _ in range(10000):
            in_flap, nb, rate = False, float("inf"), 1.0
            for f in fl:
                P, D = f["period_ms"] * 1000.0, f["dur_ms"] * 1000.0
                k = math.floor((t - f["phase_us"]) / P)
                s = f["phase_us"] + k * P
                if s <= t < s + D:
                    in_flap = True
                    nb = min(nb, s + D)
                    rate = min(rate, self.nic_bw(f["host"], step) * FLAP_DEPTH / bw_static)
                else:
                    nb = min(nb, s + P)
            if not in_flap:
                rate = 1.0
            can = (nb - t) * rate
            if can >= rem:
                t += rem / rate
                return t - t0
            rem -= can
            t = nb
        return t - t0

    # ---- transfer models (us)
    def coll_time(self, c, func, size, step, tstart, jit):
        n = c.n
        if n == 1:
            return 2.0
        if func == AR:
            wb, nst = 2.0 * (n - 1) / n * size, 2 * (n - 1)
        else:
            wb, nst = (n - 1) * size, n - 1
        if c.nnodes == 1:
            lat = 6.0 + 0.7 * nst
            return lat + wb / NVL_BUSBW * 1e6 * jit
        bw = min(self.nic_bw(h, step) for h in c.hosts)
        lat = 14.0 + 0.7 * nst + 4.0 * c.nnodes
        dur = wb / bw * 1e6 * jit
        dur = self.stretch(tstart + lat, dur, c.hosts, step, bw)
        return lat + dur

    def p2p_time(self, src, dst, size, step, tstart, share, jit):
        if src == dst:
            return 3.0 + size / SELF_COPY_BW * 1e6 * jit
        hs, hd = self.host_of[src], self.host_of[dst]
        if hs == hd:
            return 7.0 + size / NVL_P2P_BW * 1e6 * jit * share
        bw = min(self.nic_bw(hs, step), self.nic_bw(hd, step))
        lat = 18.0
        dur = size / bw * 1e6 * jit * share
        dur = self.stretch(tstart + lat, dur, (hs, hd), step, bw)
        return lat + dur

    # ---- the training program of one rank
    def program(self, r, clk, rec):
        sh = self.sh
        TP, PP, DP, EP = sh["tp"], sh["pp"], sh["dp"], sh["ep"]
        tp, dp, pp = self.coords[r]
        rc = self.rank_comms[r]
        L, M = sh["layers"], sh["mb"]
        h, seq = sh["hidden"], sh["seq"]
        rng = seeded(self.seed, "rank", r)
        speed = self.gpu_speed[r]
        act_bytes = seq * h * 2                 # bf16 activations, mbs=1
        pp_bytes = act_bytes // TP              # scatter-gather pipeline sends
        fwd_us = sh["fwd_ms"] * 1000.0
        attn_f, mlp_f = 0.45 * fwd_us, 0.55 * fwd_us
        moe = set(sh["moe_layers"])
        n_dense = L - len(moe)
        params_layer = 12 * h * h // TP
        attn_params = 4 * h * h // TP
        first, last = pp == 0, pp == PP - 1
        prev_g = r - TP * DP if not first else None
        next_g = r + TP * DP if not last else None
        ppc = rc["pp"]
        ep_c = rc.get("ep")
        EPcomm = self.comms[ep_c] if ep_c is not None else None
        st = {"step": 0}
        sself = self

        def compute(us):
            j = 1.0 + rng.gauss(0.0, SIG_COMPUTE)
            if j < 0.8:
                j = 0.8
            clk[r] += us * j * speed * sself.compute_factor(r, st["step"])

        def coll(kind, func, size):
            d = sself.late_delay(r, st["step"])
            if d:
                clk[r] += d
            return ("c", rc[kind], func, size, st["step"])

        def p2p(ops):
            d = sself.late_delay(r, st["step"])
            if d:
                clk[r] += d
            return ("p", ops, st["step"])

        # --- MoE routing: token matrix per (ep comm, step, mb, layer)
        tok_mean = seq // TP * 2 // EP if EP > 1 else 0   # top-2 routing
        mats = {}

        def routing(step, mb, l):
            key = (step, mb, l)
            m = mats.get(key)
            if m is None:
                g = seeded(self.seed, "route", ep_c, step, mb, l)
                load = [math.exp(g.gauss(0, 0.15)) for _ in range(EP)]
                m = [[max(1, int(tok_mean * load[j] * math.exp(g.gauss(0, 0.05))))
                      for j in range(EP)] for _ in range(EP)]
                mats[key] = m
            return m

        def a2a(m, transpose):
            me = EPcomm.rank_of[r]
            ops = []
            nremote = sum(1 for j in range(EP)
                          if self.host_of[EPcomm.members[j]] != self.host_of[r])
            for j in range(EP):
                if j == me and not sself.a2a_self:
                    continue
                peer = EPcomm.members[j]
                s_tok = m[j][me] if transpose else m[me][j]
                r_tok = m[me][j] if transpose else m[j][me]
                ops.append(("Send", ep_c, peer, s_tok * h * 2, max(1, nremote)))
                ops.append(("Recv", ep_c, peer, r_tok * h * 2, max(1, nremote)))
            return p2p(ops)

        def forward(mb):
            step = st["step"]
            if first:
                compute(0.05 * fwd_us)            # embedding
            for l in range(L):
                compute(attn_f)
                yield coll("tp", AR, act_bytes)
                if l in moe:
                    compute(0.05 * fwd_us)        # router
                    m = routing(step, mb, l)
                    yield a2a(m, False)
                    me = EPcomm.rank_of[r]
                    ratio = sum(m[i][me] for i in range(EP)) / float(tok_mean * EP)
                    compute(1.4 * mlp_f * ratio)  # experts
                    yield a2a(m, True)
                    yield coll("tp", AR, act_bytes)
                else:
                    compute(mlp_f)
                    yield coll("tp", AR, act_bytes)
            if last:
                compute(0.15 * fwd_us)            # output layer + loss

        def backward(mb):
            step = st["step"]
            if last:
                compute(0.3 * fwd_us)
            for l in reversed(range(L)):
                if l in moe:
                    m = routing(step, mb, l)
                    yield a2a(m, False)           # grad of combine
                    me = EPcomm.rank_of[r]
                    ratio = sum(m[i][me] for i in range(EP)) / float(tok_mean * EP)
                    compute(2.8 * mlp_f * ratio)
                    yield a2a(m, True)            # grad of dispatch
                else:
                    compute(2 * mlp_f)
                yield coll("tp", AR, act_bytes)
                compute(2 * attn_f)
                yield coll("tp", AR, act_bytes)
            if first:
                compute(0.1 * fwd_us)

        # pipeline p2p groups (Megatron batch order: prev first, then next)
        def recv_forward():
            if not first:
                yield p2p([("Recv", ppc, prev_g, pp_bytes, 1)])

        def send_forward():
            if not last:
                yield p2p([("Send", ppc, next_g, pp_bytes, 1)])

        def recv_backward():
            if not last:
                yield p2p([("Recv", ppc, next_g, pp_bytes, 1)])

        def send_backward():
            if not first:
                yield p2p([("Send", ppc, prev_g, pp_bytes, 1)])

        def send_forward_recv_backward():
            if not last:
                yield p2p([("Send", ppc, next_g, pp_bytes, 1), ("Recv", ppc, next_g, pp_bytes, 1)])

        def send_backward_recv_forward():
            if not first:
                yield p2p([("Send", ppc, prev_g, pp_bytes, 1), ("Recv", ppc, prev_g, pp_bytes, 1)])

        # gradient buckets (Megatron distributed optimizer, 40M-param buckets, bf16)
        def buckets(nparams):
            out, left = [], nparams
            while left > 0:
                b = min(left, 40_000_000)
                out.append(b * 2)
                left -= b
            return out

        if EP > 1:
            dense_params = n_dense * params_layer + len(moe) * attn_params
            expert_params = len(moe) * (8 * h * h // TP) * 2   # 2 local experts
        else:
            dense_params, expert_params = L * params_layer, 0
        dense_b, exp_b = buckets(dense_params), buckets(expert_params)
        dpn = self.comms[rc["dp"]].n
        edpn = self.comms[rc["edp"]].n if "edp" in rc else 1

        # start-up barrier (tiny world all-reduce: below min size, not recorded)
        yield coll("world", AR, 4)
        for step in range(self.steps):
            st["step"] = step
            rec["start"][step] = clk[r]
            hic = rng.random() < HICCUP_P
            hic_mb, hic_us = rng.randrange(M), rng.uniform(2000, 15000)
            if step == 0:
                clk[r] += rng.uniform(40000, 60000)      # first-step warm-up (allocator, autotune)
            warm = min(PP - pp - 1, M)
            rem = M - warm
            mb_f = 0
            mb_b = 0

            def maybe_hiccup(mb):
                if hic and mb == hic_mb:
                    clk[r] += hic_us
                    rec["hiccups"].append((step, hic_us))
            for _ in range(warm):
                yield from recv_forward()
                maybe_hiccup(mb_f)
                yield from forward(mb_f)
                mb_f += 1
                yield from send_forward()
            if rem > 0:
                yield from recv_forward()
            for i in range(rem):
                maybe_hiccup(mb_f)
                yield from forward(mb_f)
                mb_f += 1
                yield from send_forward_recv_backward()
                yield from backward(mb_b)
                mb_b += 1
                if i == rem - 1:
                    yield from send_backward()
                else:
                    yield from send_backward_recv_forward()
            for _ in range(warm):
                yield from recv_backward()
                yield from backward(mb_b)
                mb_b += 1
                yield from send_backward()
            # gradient sync + optimizer
            for b in dense_b:
                yield coll("dp", RS, b // dpn)
            for b in exp_b:
                if edpn > 1:
                    yield coll("edp", RS, b // edpn)
            if last:
                yield coll("dp", AR, 4)            # loss averaging (not recorded)
            yield coll("mp", AR, 4)                # grad norm (not recorded)
            compute(0.012 * (dense_params + expert_params) / 1e6 * 1000.0 / 2.0)
            for b in dense_b:
                yield coll("dp", AG, b // dpn)
            for b in exp_b:
                if edpn > 1:
                    yield coll("edp", AG, b // edpn)
            if step % 10 == 9:
                yield coll("world", AR, 131072)    # logging metrics
            rec["end"][step] = clk[r]

    def run(self):
        W = self.W
        clk = [self.t0] * W
        recs = [{"ops": [], "start": [0.0] * self.steps, "end": [0.0] * self.steps,
                 "hiccups": []} for _ in range(W)]
        gens = [self.program(r, clk, recs[r]) for r in range(W)]
        comms = self.comms
        coll_seq = [dict() for _ in range(W)]
        coll_sn = [dict() for _ in range(W)]          # (cid, func) -> next sn
        p2p_sn = [dict() for _ in range(W)]           # cid -> next sn
        coll_wait = {}
        p2p_cnt = {}
        p2p_wait = {}
        grp_left = [0] * W
        grp_end = [0.0] * W
        crng = {}
        drng = [seeded(self.seed, "detect", r) for r in range(W)]
        ready = list(range(W - 1, -1, -1))
        done = 0

        def comm_rng(key):
            g = crng.get(key)
            if g is None:
                g = crng[key] = seeded(self.seed, "comm", key)
            return g

        while ready:
            r = ready.pop()
            try:
                req = next(gens[r])
            except StopIteration:
                done += 1
                continue
            if req[0] == "c":
                _, cid, func, size, step = req
                c = comms[cid]
                sq = coll_seq[r].get(cid, 0)
                coll_seq[r][cid] = sq + 1
                k2 = (cid, func)
                sn = coll_sn[r].get(k2, 0)
                coll_sn[r][k2] = sn + 1
                key = (cid, sq)
                w = coll_wait.get(key)
                if w is None:
                    w = coll_wait[key] = []
                w.append((r, clk[r], sn, step))
                if len(w) == c.n:
                    del coll_wait[key]
                    tmax = max(x[1] for x in w)
                    g = comm_rng(cid)
                    jit = math.exp(g.gauss(0.0, SIG_COMM))
                    stp = max(x[3] for x in w)
                    end = tmax + self.coll_time(c, func, size, stp, tmax, jit)
                    for (m, ta, snm, _) in w:
                        dr = drng[m]
                        e = end + dr.uniform(0.0, 2.0)
                        clk[m] = e
                        if size >= MIN_SIZE:
                            recs[m]["ops"].append((e + dr.uniform(5.0, 40.0), cid, 0, func, snm,
                                                   size, e - ta, -1))
                        ready.append(m)
            else:
                _, ops, step = req
                t = clk[r]
                grp_left[r] = len(ops)
                grp_end[r] = t
                for (kind, cid, peer, size, share) in ops:
                    sn = p2p_sn[r].get(cid, 0)
                    p2p_sn[r][cid] = sn + 1
                    if kind == "Send":
                        src, dst = r, peer
                    else:
                        src, dst = peer, r
                    ck = (kind, cid, src, dst)
                    k = p2p_cnt.get(ck, 0)
                    p2p_cnt[ck] = k + 1
                    mk = (cid, src, dst, k)
                    other = p2p_wait.pop(mk, None)
                    mine = (r, t, sn, kind, cid, peer, size, share, step)
                    if other is None:
                        p2p_wait[mk] = mine
                        continue
                    ts = max(t, other[1])
                    g = comm_rng((cid, src, dst))
                    jit = math.exp(g.gauss(0.0, SIG_COMM))
                    sz = size if kind == "Send" else other[6]
                    end = ts + self.p2p_time(src, dst, sz, max(step, other[8]), ts,
                                             max(share, other[7]), jit)
                    for side in (mine, other):
                        m = side[0]
                        dr = drng[m]
                        e = end + dr.uniform(0.0, 2.0)
                        if side[6] >= MIN_SIZE:
                            pr = comms[side[4]].rank_of[side[5]]
                            recs[m]["ops"].append((e + dr.uniform(5.0, 40.0), side[4], 1,
                                                   0 if side[3] == "Send" else 1, side[2],
                                                   side[6], e - side[1], pr))
                        if e > grp_end[m]:
                            grp_end[m] = e
                        grp_left[m] -= 1
                        if grp_left[m] == 0 and m != r:
                            clk[m] = grp_end[m]
                            ready.append(m)
                if grp_left[r] == 0:
                    clk[r] = grp_end[r]
                    ready.append(r)
        if done != W or coll_wait or p2p_wait:
            raise RuntimeError("deadlock: %d/%d ranks finished, %d colls, %d p2p pending"
                               % (done, W, len(coll_wait), len(p2p_wait)))
        return recs


# ----------------------------------------------------------------------------
# Dump emulation + writing
# ----------------------------------------------------------------------------
def fmt_bw(size, n, func, exec_us, p2p):
    if exec_us <= 0:
        return "0.000000", "0.000000"
    t = exec_us / 1e6
    if p2p:
        a = size / 1e9 / t
        return "%.6f" % a, "%.6f" % a
    if func == AR:
        a = size / 1e9 / t
    else:
        a = size * n / 1e9 / t
    return "%.6f" % a, "%.6f" % (a * BUSF[func](n))


def write_logs(outdir, flavour, interval_us, W, comms, rank_comms, recs, host_of, hostnames,
               pids, clock, proc_init, proc_exit, git_rev, seed):
    logs = os.path.join(outdir, "logs")
    os.makedirs(logs, exist_ok=True)
    for fn in os.listdir(logs):
        os.unlink(os.path.join(logs, fn))
    stats = {"lines": 0, "coll_lines": 0, "p2p_lines": 0, "dropped": 0, "bytes": 0,
             "not_dumped": 0}
    order = ["world", "dp", "mp", "tp", "pp", "ep", "edp"]
    for r in range(W):
        rng = seeded(seed, "dump", r)
        host = hostnames[host_of[r]]
        pid = pids[r]
        off, drift = clock[host_of[r]]
        cids = [rank_comms[r][k] for k in order if k in rank_comms[r]]
        pos = {cid: i for i, cid in enumerate(cids)}
        prefix = {}
        for cid in cids:
            c = comms[cid]
            hdr = '{"id":"%s",' % c.hash
            if flavour == "2.30":
                hdr += '"comm_name":"%s",' % c.name
            hdr += '"rank":%d,"n_ranks":%d,"nnodes":%d}' % (c.rank_of[r], c.n, c.nnodes)
            prefix[cid] = ('{"header":' + hdr + ',"metadata":{"inspector_output_format_version":"v4.0",'
                           '"git_rev":"%s","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":' % git_rev)
        mid = ',"hostname":"%s","pid":%d},' % (host, pid)
        ops = sorted(recs[r]["ops"])
        # per comm queues: coll and p2p, in detection order
        qc = {cid: [] for cid in cids}
        qp = {cid: [] for cid in cids}
        for o in ops:
            (qp if o[2] else qc)[o[1]].append(o)
        ic = {cid: 0 for cid in cids}
        ip = {cid: 0 for cid in cids}
        lines = []
        tick = proc_init[r] + interval_us + rng.uniform(30, 120)
        end = proc_exit[r]
        while tick <= end:
            wt = tick
            for cid in cids:
                c = comms[cid]
                for q, ix, isp in ((qc[cid], ic, 0), (qp[cid], ip, 1)):
                    i0 = ix[cid]
                    j = bisect.bisect_right(q, (tick, float("inf")), lo=i0)
                    if j == i0:
                        continue
                    ix[cid] = j
                    batch = q[i0:j]
                    if flavour == "2.29":
                        if isp:
                            continue            # P2P not tracked before 2.30
                        batch = batch[-1:]      # single latest-completed slot
                    elif len(batch) > RING_SIZE:
                        stats["dropped"] += len(batch) - RING_SIZE
                        batch = batch[-RING_SIZE:]
                    pre = prefix[cid]
                    for o in batch:
                        wt += rng.uniform(0.8, 2.5)
                        tsw = int(wt + off + drift * (wt - 0))
                        ex = int(o[6])
                        if isp:
                            a, b = fmt_bw(o[5], 2, None, ex, True)
                            perf = ('"p2p_perf":{"p2p":"%s","p2p_sn":%d,"p2p_peer":%d,'
                                    '"p2p_msg_size_bytes":%d,"p2p_exec_time_us":%d,'
                                    '"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":%s,'
                                    '"p2p_busbw_gbs":%s}}' % ("Send" if o[3] == 0 else "Recv",
                                                             o[4], o[7], o[5], ex, a, b))
                            stats["p2p_lines"] += 1
                        else:
                            a, b = fmt_bw(o[5], c.n, o[3], ex, False)
                            perf = ('"coll_perf":{"coll":"%s","coll_sn":%d,"coll_msg_size_bytes":%d,'
                                    '"coll_exec_time_us":%d,"coll_timing_source":"kernel_gpu",'
                                    '"coll_algobw_gbs":%s,"coll_busbw_gbs":%s}}'
                                    % (FUNCS[o[3]], o[4], o[5], ex, a, b))
                            stats["coll_lines"] += 1
                        lines.append(pre + str(tsw) + mid + perf)
            # dump pass took (wt - tick); the thread then sleeps the interval
            tick = wt + interval_us + rng.uniform(50, 150)
        for cid in cids:
            stats["not_dumped"] += len(qc[cid]) - ic[cid] + len(qp[cid]) - ip[cid]
        if lines:   # the file is only created at the first dump that writes
            data = "\n".join(lines) + "\n"
            with open(os.path.join(logs, "%s-pid%d.log" % (host, pid)), "w") as fh:
                fh.write(data)
            stats["bytes"] += len(data)
            stats["lines"] += len(lines)
    return stats


# ----------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--fault", default="healthy",
                    help="e.g. straggler:rank=37:factor=1.3:from=0:to=end ; join faults with '+'")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--flavour", choices=["2.30", "2.29"], default="2.30")
    ap.add_argument("--dump-interval-us", type=int, default=500000,
                    help="NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS (default 500000)")
    ap.add_argument("--comm-names", choices=["unknown", "named", "auto"], default="auto")
    ap.add_argument("--launcher", choices=["slurm", "torchrun", "auto"], default="auto")
    ap.add_argument("--a2a-self", action="store_true",
                    help="also record the send/recv-to-self of MoE all-to-alls (off by default)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the fault-free reference run used to measure severity")
    a = ap.parse_args()
    t_begin = time.time()

    sh = dict(SHAPES[a.shape])
    steps = a.steps or sh["steps"]
    rng = seeded(a.seed, "job")
    launcher = a.launcher if a.launcher != "auto" else rng.choice(["slurm", "torchrun"])
    comm_names = a.comm_names if a.comm_names != "auto" else rng.choice(["unknown", "named"])
    if a.flavour == "2.29":
        comm_names = "absent"
    W, nh, coords, hostnames, host_of = build_layout(sh, rng, launcher)
    comms, rank_comms = build_comms(sh, W, coords, host_of, rng,
                                    comm_names if comm_names != "absent" else "unknown")
    faults = parse_faults(a.fault, steps, W, nh, rng)

    # wall clock: job starts somewhere in 2026; processes init NCCL within ~3 s
    epoch0 = 1767225600_000000 + rng.randrange(0, 200 * 86400) * 1_000_000 + rng.randrange(10**6)
    proc_init = []
    host_base_pid = [rng.randrange(3000, 3_000_000) for _ in range(nh)]
    pids = []
    for r in range(W):
        proc_init.append(rng.uniform(0, 3e6))
        pids.append(host_base_pid[host_of[r]] + 7 * (r % GPUS_PER_HOST) + rng.randrange(0, 4))
    train_start = 8e6
    clock = [(rng.uniform(-3000, 3000), rng.uniform(-10e-6, 10e-6)) for _ in range(nh)]
    git_rev = rng.choice(["", "1f9c2ab47", "a33e1d0c2-dirty"])

    sim = Sim(sh, steps, a.seed, W, nh, coords, host_of, comms, rank_comms, faults, train_start)
    sim.a2a_self = a.a2a_self
    t_sim = time.time()
    recs = sim.run()
    t_sim = time.time() - t_sim
    base = None
    if faults and not a.no_baseline:
        bsim = Sim(sh, steps, a.seed, W, nh, coords, host_of, comms, rank_comms, [], train_start)
        bsim.a2a_self = a.a2a_self
        base = bsim.run()

    step_start = [min(recs[r]["start"][s] for r in range(W)) for s in range(steps)]
    step_end = [max(recs[r]["end"][s] for r in range(W)) for s in range(steps)]
    job_end = max(step_end)
    proc_exit = [job_end + rng.uniform(2e6, 4e6) for _ in range(W)]   # checkpoint + teardown

    # absolute times: shift by epoch (host clocks add offset + drift)
    abs_clock = [(off + epoch0, dr) for (off, dr) in clock]
    t_w = time.time()
    stats = write_logs(a.out, a.flavour, a.dump_interval_us, W, comms, rank_comms, recs, host_of,
                       hostnames, pids, [(epoch0 + off, dr) for off, dr in clock],
                       proc_init, proc_exit, git_rev, a.seed)
    t_w = time.time() - t_w

    def dur(rs, s):
        return max(rs[r]["end"][s] for r in range(W)) - min(rs[r]["start"][s] for r in range(W))

    # per-step duration: time from the previous step's global end to this step's
    def step_times(rs):
        out = []
        for s in range(steps):
            e = max(x["end"][s] for x in rs)
            b = max(x["end"][s - 1] for x in rs) if s else min(x["start"][0] for x in rs)
            out.append(e - b)
        return out

    st_f = step_times(recs)
    st_b = step_times(base) if base else None

    truth_faults = []
    for f in faults:
        d = {"kind": f["kind"]}
        if "rank" in f:
            ranks = [f["rank"]]
            hosts = [host_of[f["rank"]]]
            d["level"] = "rank"
        else:
            hosts = [f["host"]]
            ranks = [r for r in range(W) if host_of[r] == f["host"]]
            d["level"] = "host"
        d["culprit_ranks"] = ranks
        d["culprit_hosts"] = [hostnames[h] for h in hosts]
        d["culprit_host_index"] = hosts
        first, last = f["from"], f["to"] - 1
        d["window_steps"] = {"first": first, "last": last, "whole_job": first == 0 and last == steps - 1}
        d["window_us"] = {"start": int(epoch0 + step_start[first]), "end": int(epoch0 + step_end[last])}
        sev = {}
        for k in ("factor", "frac", "delay_us", "period_ms", "dur_ms"):
            if k in f:
                sev[k] = f[k]
        if f["kind"] == "flap":
            P, D = f["period_ms"] * 1000, f["dur_ms"] * 1000
            ev, k = [], 0
            t = f["phase_us"]
            while t < step_end[last]:
                if t + D > step_start[first]:
                    ev.append([int(epoch0 + t), int(epoch0 + t + D)])
                t += P
            d["flap_events_us"] = ev
            sev["bandwidth_fraction_during_flap"] = FLAP_DEPTH
        if st_b:
            w = range(first, last + 1)
            fs = sum(st_f[s] for s in w)
            bs = sum(st_b[s] for s in w)
            sev["step_time_ratio_vs_healthy"] = round(fs / bs, 4)
        d["severity"] = sev
        d["spec"] = {k: v for k, v in f.items() if k not in ("phase_us",)}
        truth_faults.append(d)

    sizes = {"tp": sh["tp"], "pp": sh["pp"], "dp": sh["dp"], "ep": sh["ep"]}
    truth = {
        "generator": "extgen/gen.py",
        "shape": a.shape, "seed": a.seed, "steps": steps, "fault_spec": a.fault,
        "fault_kind": "+".join(f["kind"] for f in faults) if faults else "healthy",
        "healthy": not faults,
        "faults": truth_faults,
        "culprit_ranks": sorted(set(r for d in truth_faults for r in d["culprit_ranks"])),
        "culprit_hosts": sorted(set(h for d in truth_faults for h in d["culprit_hosts"])),
        "layout": {
            "world_size": W, **sizes, "gpus_per_host": GPUS_PER_HOST, "hosts": nh,
            "rank_order": "Megatron tp-ep-dp-pp: rank = tp + TP*(dp + DP*pp); node = rank // 8",
            "launcher": launcher,
            "rank_to_host": [hostnames[host_of[r]] for r in range(W)],
            "rank_to_host_index": host_of,
            "rank_to_pid": pids,
            "rank_to_log": ["%s-pid%d.log" % (hostnames[host_of[r]], pids[r]) for r in range(W)],
            "rank_coords": [{"tp": c[0], "dp": c[1], "pp": c[2],
                             "ep": (c[1] % sh["ep"]) if sh["ep"] > 1 else None} for c in coords],
            "hostnames": hostnames,
            "layers_per_stage": sh["layers"], "micro_batches": sh["mb"],
            "moe_layers": list(sh["moe_layers"]), "schedule": "1F1B (Megatron, non-interleaved)",
            "comms": [{"id": c.hash, "kind": c.kind, "comm_name": c.name if a.flavour == "2.30" else None,
                       "label": c.label, "n_ranks": c.n, "nnodes": c.nnodes, "members": c.members}
                      for c in comms],
        },
        "dump": {"flavour": a.flavour, "interval_us": a.dump_interval_us,
                 "ring_size": RING_SIZE if a.flavour == "2.30" else None,
                 "min_size_bytes": MIN_SIZE if a.flavour == "2.30" else None,
                 "timestamp": "dump_timestamp_us = host wall clock when the line was written",
                 "host_clock_offset_us": {hostnames[h]: round(clock[h][0], 1) for h in range(nh)},
                 "host_clock_drift_ppm": {hostnames[h]: round(clock[h][1] * 1e6, 3) for h in range(nh)},
                 "records_dropped_ring_overflow": stats["dropped"],
                 "records_never_dumped": stats["not_dumped"]},
        "timeline_us": {
            "epoch_us": epoch0, "train_start": int(epoch0 + train_start), "job_end": int(epoch0 + job_end),
            "step_start": [int(epoch0 + x) for x in step_start],
            "step_end": [int(epoch0 + x) for x in step_end],
            "step_time_us": [int(x) for x in st_f],
            "healthy_step_time_us": [int(x) for x in st_b] if st_b else None,
        },
        "nuisance_events": {"cpu_hiccups": [{"rank": r, "step": s, "us": int(u)}
                                             for r in range(W) for (s, u) in recs[r]["hiccups"]],
                            "note": "random short CPU stalls present in every job (not faults)"},
        "output": {"files": len(os.listdir(os.path.join(a.out, "logs"))), "lines": stats["lines"], "coll_lines": stats["coll_lines"],
                   "p2p_lines": stats["p2p_lines"], "bytes": stats["bytes"]},
        "gen_seconds": {"simulate": round(t_sim, 2), "write": round(t_w, 2),
                        "total": round(time.time() - t_begin, 2)},
    }
    with open(os.path.join(a.out, "truth.json"), "w") as fh:
        json.dump(truth, fh, indent=1)
    print("%s %s seed=%d steps=%d: %d files, %d lines (%d coll, %d p2p), %.1f MB, step %.0f ms, %.1fs"
          % (a.shape, a.fault, a.seed, steps, truth["output"]["files"], stats["lines"], stats["coll_lines"],
             stats["p2p_lines"], stats["bytes"] / 1e6, sum(st_f) / len(st_f) / 1000,
             time.time() - t_begin))


if __name__ == "__main__":
    main()
