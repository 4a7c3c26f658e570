#!/usr/bin/env python3
"""Disables each cross-check, merge and suppression rule of the diagnosis in turn, rebuilds, and
runs the diagnosis tests (and, with --eval, the small suite's floors): every rule must make at
least one test fail when it is gone. Prints one line per rule with the tests that failed.

usage: bench/rule_mutations.py [BUILD_DIR] [--eval] [--only SUBSTRING[|SUBSTRING...]]
       bench/rule_mutations.py --check   (no build: every rule's text is in its file exactly once;
                                          a CTest, so that a rewrite cannot leave a rule unchecked)

Restores every file it touched, also when interrupted. Takes about a minute per rule on 2 cores
(five with --eval)."""
import os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = 'analysis/diagnose/'
# (rule, file, text, replacement): the replacement turns the rule off.
RULES = [
    ('late arrival: noise is the waiting members\' arrival spread', D + 'late_arrival.cc',
     'x.n == 2 ? WaitOf(x) : x.tmax - x.tmed', 'WaitOf(x)'),
    ('late arrival: exact binomial tail against every membership (Bonferroni)', D + 'late_arrival.cc',
     'e.log_bar = log_alpha - (sampled_cells', 'e.log_bar = log_alpha * 0 + 1e9 - (sampled_cells'),
    ('late arrival: z-score bar', D + 'late_arrival.cc', 'e.z < o.min_z ||', 'false ||'),
    ('late arrival: each operation of a communicator is tested on its own too', D + 'late_arrival.cc',
     '  for (const auto& [op, cs] : op_cells) Scan(', '  if (false) for (const auto& [op, cs] : op_cells) Scan('),
    ('late arrival: the member last but one is tested where the last member has a late run there', D + 'late_arrival.cc',
     '  events.insert(events.end(), hidden.begin(), hidden.end());',
     '  if (false) events.insert(events.end(), hidden.begin(), hidden.end());'),
    ('late arrival: peer-time floor', D + 'late_arrival.cc', 'if (e.wait_share < o.min_wait_share && !across_host[i]) continue;', ''),
    ('late arrival: ... waived where every rank of a host is late, each in a group of its own', D + 'late_arrival.cc',
     'o.min_wait_share && !across_host[i]', 'o.min_wait_share'),
    ('late arrival: ... as rarely by chance as alpha over the job\'s hosts', D + 'late_arrival.cc',
     'if (log_inv_chance > log_hosts_over_alpha)', 'if (log_inv_chance > 0 * log_hosts_over_alpha)'),
    ('late arrival: lateness after the wait that explained it ended is the rank\'s own', D + 'late_arrival.cc',
     'if (own) roots.push_back(own);', 'if (own && false) roots.push_back(own);'),
    ('late arrival: a root waiting for a stronger root where only that one is late follows it', D + 'late_arrival.cc',
     'if (!leader) { kept.push_back(r); continue; }', 'kept.push_back(r);\n      continue;'),
    ('late arrival: a sampled record against at least 16 peer records', D + 'late_arrival.cc',
     'constexpr size_t kMinNeighbours = 16;', 'constexpr size_t kMinNeighbours = 8;'),
    ('late arrival: a sampled record shorter than all but one peer record is a second trial', D + 'late_arrival.cc',
     'Scan(cells[1], tests, W, o, true, false, &events);', ''),
    ('late arrival: a host whose members share its late arrivals is tested as a host (chance m/n)', D + 'late_arrival.cc',
     'Scan(host_cells, tests, W, o, false, false, &host_events);', '(void)host_cells;'),
    ('late arrival: a late host is last clearly more often than each other host',
     D + 'late_arrival.cc', 'p) <= log_alpha;', 'p) <= log_alpha * 0;'),
    ('late arrival: ... as strictly as the host\'s own test (not at the bare error rate)', D + 'late_arrival.cc',
     'p) <= log_alpha;', 'p) <= log_alpha * 0 + std::log(o.alpha);'),
    ('late arrival: a late host\'s members are those last at least half their equal share', D + 'late_arrival.cc',
     'if (!host_late && 2.0 * hm.at(h) * lw.first < he.last) continue;', 'if (!host_late && lw.first < 1) continue;'),
    ('late arrival: a host whose members all arrived after every other member is tested as late as a whole (chance 1/C(n,m))',
     D + 'late_arrival.cc', 'Scan(late_host_cells, tests, W, o, false, false, &host_events);', '(void)late_host_cells;'),
    ('late arrival: a rank of a host late as a whole follows none of its host\'s ranks', D + 'late_arrival.cc',
     'if (r->host_as_whole &&', 'if (false && r->host_as_whole &&'),
    ('late arrival: a host\'s late runs apart by less than its records\' placement in time are one finding',
     D + 'late_arrival.cc', 'e->w0 > end + 1 + lag', 'e->w0 > end + 1'),
    ('late arrival: a host test\'s instances are counted once in its finding', D + 'late_arrival.cc',
     'if (e->host_test < 0 || host_tests.insert(e->host_test).second) {', 'if (true) {'),
    ('late arrival: waiting in the same communicator never explains lateness there', D + 'late_arrival.cc',
     'f.proc == e.proc || f.comm == e.comm ||', 'f.proc == e.proc ||'),
    ('late arrival: a root that waited on a stronger root\'s side of its pipeline follows it', D + 'late_arrival.cc',
     '              o.explained_share * r.wait_us)', '              1e300)'),
    ('late arrival: ... a root leader too, by a wait beyond the follower\'s peers\' on that side', D + 'late_arrival.cc',
     '(y_root && *q == y.proc ? 0.0 : peers[q < rr])', '(y_root ? 0.0 : peers[q < rr])'),
    ('late arrival: ... except where its pipeline peer is the root leader itself', D + 'late_arrival.cc',
     '(y_root && *q == y.proc ? 0.0 : peers[q < rr])', '(y_root * 0.0 + peers[q < rr])'),
    ('late arrival: ... or on the side of a rank the stronger root holds (its tensor-parallel partner)',
     D + 'late_arrival.cc', 'if (q == rr || std::find(held.begin(), held.end(), *q) == held.end()) continue;',
     'if (q == rr || (*q != y.proc && !held.empty())) continue;'),
    ('late arrival: pipeline waits are summed one dump interval past the late run (dump-timed records)',
     D + 'late_arrival.cc', 'm.p2p_lag = PlacementLag(d.p2p, W);', 'm.p2p_lag = 0 * PlacementLag(d.p2p, W);'),
    ('late arrival: an all-to-all\'s transfers compare with their siblings\' whatever their sizes', D + 'late_arrival.cc',
     'all_to_all[ci] ? -1 : x.bytes', 'all_to_all[ci] ? x.bytes : x.bytes'),
    ('late arrival: an all-to-all has no sides (its waits make no pipeline follower)', D + 'late_arrival.cc',
     'if (!sides || all_to_all[static_cast<size_t>(a.comm)]) continue;',
     'if (!sides || (all_to_all[static_cast<size_t>(a.comm)] && false)) continue;'),
    ('consolidate: a slow network whose every slow communicator spans a slow link\'s host is that link', D + 'registry.cc',
     'Subset(network.comms, link.comms) && OverlapInTime(link, network);',
     'Subset(network.comms, link.comms) && OverlapInTime(link, network) && false;'),
    ('a size that never repeats is timed at its siblings\' rate within a factor of two', D + 'comm_data.cc',
     'if (v.size() >= kOwnSiblings) usual[k]', 'if (v.size() >= kOwnSiblings * 0) usual[k]'),
    ('late arrival: sibling pipelines are compared transfer by transfer (sequence number), not by window',
     D + 'late_arrival.cc', 'x.sn >= 0 ? x.sn : -1 - w;', '-1 - w;'),
    ('late arrival: a rank others explain still leads the ranks after it on its pipeline', D + 'late_arrival.cc',
     'const int strength = root ? lasts[y->proc] : explained_lasts[y->proc];',
     'const int strength = root ? lasts[y->proc] : explained_lasts[y->proc];\n        if (!root) continue;'),
    ("late arrival: ... by a wait beyond its peers' on that side", D + 'late_arrival.cc',
     'if (!v.empty()) out[upstream] = Median(std::move(v));', 'if (false) out[upstream] = Median(std::move(v));'),
    ('late arrival: ... however often it was late itself', D + 'late_arrival.cc',
     '(root && strength < lasts[r->proc])', '(strength < lasts[r->proc])'),
    ('late arrival: sampled records and complete instances count together; the 8-instance floor is for complete ones',
     D + 'late_arrival.cc', 'if (sampled == 0 && e.instances < o.min_instances)', 'if (e.instances < o.min_instances)'),
    ('members logging: a member\'s range reaches one sampling step beyond its records', D + 'comm_data.cc',
     'THEN (max(r.sn) - min(r.sn)) // (count(*) - 1) ELSE 0 END', 'THEN 0 ELSE 0 END'),
    ('late arrival: only material waits say who was last', D + 'late_arrival.cc',
     'if (wait < material.at(KernelKey(d, x))) continue;', ''),
    ('late arrival: waiting on a late member of another communicator explains lateness', D + 'late_arrival.cc',
     'waited += f.wait_us * overlap;', ''),
    ('late arrival: each holding explains at most one late arrival', D + 'late_arrival.cc',
     'waited = std::min(waited, e.WaitIn(w0, w1) * held_times / std::max(1, e.LastIn(w0, w1)));', ''),
    ('late arrival: waiting on pipeline peers explains lateness', D + 'late_arrival.cc',
     'p2p += std::max(0.0, mine - Median(theirs));', 'p2p += 0 * std::max(0.0, mine - Median(theirs));'),
    ('late arrival: ... weighed against the peers\' waits kind by kind (pipeline, expert all-to-all)', D + 'late_arrival.cc',
     'out[p2p_kind[static_cast<size_t>(c)]] +=', 'out[0] +='),
    ('late arrival: a host late in its sibling groups at once is explained together', D + 'late_arrival.cc',
     'wait > 0 && owed >= o.explained_share * wait', 'false && wait > 0 && owed >= o.explained_share * wait'),
    ('late arrival: ... siblings span as many hosts (a host\'s tensor-parallel group is no data-parallel group\'s sibling)',
     D + 'late_arrival.cc', 'd.comms[static_cast<size_t>(c)].nnodes == d.comms[static_cast<size_t>(e.comm)].nnodes;', 'true;'),
    ('late arrival: ... leaving out host mates\' waits on late members (they may wait on the rank itself)',
     D + 'late_arrival.cc', 'owed_here += std::min(x == &e ? w.Sum() : w.p2p + w.xfer, wait);',
     'owed_here += std::min(w.Sum(), wait);'),
    ('late arrival: ... each mate\'s waits explaining at most its own lateness', D + 'late_arrival.cc',
     'owed_here += std::min(x == &e ? w.Sum() : w.p2p + w.xfer, wait);',
     'owed_here += x == &e ? w.Sum() : w.p2p + w.xfer;'),
    ('late arrival: slow transfers elsewhere explain lateness', D + 'late_arrival.cc',
     'const double xfer = std::max(0.0,', 'const double xfer = 0 * std::max(0.0,'),
    ('late arrival: one finding per host and overlapping windows', D + 'late_arrival.cc',
     'if (groups.empty() || e->w0 > end + 1 + lag) groups.emplace_back();', 'groups.emplace_back();'),
    ('slow link: an all-to-all is as slow as its slowest host\'s transfers', D + 'comm_detect.cc',
     'level = std::max(level, q25(e));', 'level = level < 0 ? q25(e) : std::min(level, q25(e));'),
    ('slow link: an all-to-all is one channel', D + 'comm_data.cc',
     'out[c] = m >= 3 && pairs[c]', 'out[c] = false && m >= 3 && pairs[c]'),
    ('slow link: a pipeline pair is timed by its wire time, the shorter of Send and Recv', D + 'comm_detect.cc',
     'std::max(t.from, t.to), t.ts, t.Wire());', 'std::max(t.from, t.to), t.ts, std::max(t.send, t.recv));'),
    ('slow link: a host with fast channels is cleared (host cover)', D + 'comm_detect.cc',
     'if (static_cast<double>(s) / T[h] < o.host_cover) continue;', ''),
    ('slow link: many hosts with no common host are contention', D + 'comm_detect.cc',
     'const bool contention = chosen.size()', 'const bool contention = false && chosen.size()'),
    ('slow link: a communicator\'s own better windows are its usual time when its peers are slower', D + 'comm_detect.cc',
     'it != own_base.end()) base = std::min(base, it->second);', 'false) base = 0;'),
    ('slow link: hosts covering other channels are other culprits, not one ambiguous set', D + 'comm_detect.cc',
     'if (cs == u.comms) u.hosts.push_back(h);', 'if (cs.size() == u.comms.size()) u.hosts.push_back(h);'),
    ('slow link: one window is transient contention', D + 'comm_detect.cc',
     'if (nwin < 2) continue;', ''),
    ('Send and Recv pair by their order per peer (flaps, slow links)', D + 'comm_data.cc',
     '[{x.comm, from, to, x.bytes}]', '[{x.comm, from, to, x.bytes * 1000003 + x.sn}]'),
    ('link flap: completion intervals tell outages apart', D + 'link_flap.cc',
     'if (worked != healthy.begin()) {', 'if (false && worked != healthy.begin()) {'),
    ('link flap: a new burst needs the link to have worked in between', D + 'link_flap.cc',
     't.ratio < o.link_ratio && t.bytes >= (1 << 20) && std::includes(', 't.ratio < 1e9 * o.link_ratio && std::includes('),
    ('link flap: one or two outages are named only where one host is singled out', D + 'link_flap.cc',
     'if (!flaps && ambiguous) {', 'if (false) {'),
    ('pipeline bubble: a stage whose own activations arrived as much later passes the delay on', D + 'bubble_detect.cc',
     'if (upstream >= 0.5 * e) {', 'if (false && upstream >= 0.5 * e) {'),
    ('late arrival: what explains lateness is weighed block by block of the run', D + 'late_arrival.cc',
     'const int n = std::max(1, (w1 - w0 + 1) / block);', 'const int n = 1 + 0 * std::max(1, (w1 - w0 + 1) / block);'),
    ('pipeline bubble: a window\'s idle share is its mean wait times the job\'s receive rate', D + 'bubble_detect.cc',
     '* l.receives / span_us;', '* a.nr / WindowUs(d, o) + 0 * l.receives / span_us;'),
    ('mismatch: a mostly sampled run cannot show a missing op', D + 'comm_detect.cc',
     'if (covered(x.comm, x.op, x.ts)) report(', 'if (true || covered(x.comm, x.op, x.ts)) report('),
    ('merge: a hang naming no root cause is the same hang', D + 'registry.cc',
     'return b.ranks.empty(); }, true},', 'return false && b.ranks.empty(); }, true},'),
    ('merge: hang findings blaming the same rank', D + 'registry.cc',
     'return a.detector != b.detector && ShareRank(a, b);', 'return false && ShareRank(a, b);'),
    ('merge: one bubble per stage', D + 'registry.cc',
     '[](const Finding& a, const Finding& b) { return ShareRank(a, b); }},',
     '[](const Finding& a, const Finding& b) { return false && ShareRank(a, b); }},'),
    ('merge: ... over any windows', D + 'registry.cc',
     '[](const Finding& a, const Finding& b) { return ShareRank(a, b); }},',
     '[](const Finding& a, const Finding& b) { return ShareRank(a, b) && OverlapInTime(a, b); }},'),
    ('merge: one link per host set', D + 'registry.cc',
     '"the same hosts\' link",\n       [](const Finding& a, const Finding& b) { return a.hosts',
     '"the same hosts\' link",\n       [](const Finding& a, const Finding& b) { return false && a.hosts'),
    ('merge: a slow network takes its one late host', D + 'registry.cc',
     'return b.hosts.size() == 1 && Subset(b.hosts, a.hosts)', 'return false && b.hosts.size() == 1'),
    ('a network whose hosts the data cannot tell apart names no culprit', D + 'comm_detect.cc',
     'f.kind = a.ambiguous ? Kind::kSlowNetwork : Kind::kSlowLink;', 'f.kind = Kind::kSlowLink;'),
    ('merge: one compute straggler per host', D + 'registry.cc',
     '(Subset(b.hosts, a.hosts) || Subset(a.hosts, b.hosts)) &&', 'false &&'),
    ('merge: the proxy wire names one end among the records\' slow hosts', D + 'registry.cc',
     'return Subset(wire.hosts, other.hosts) && ShareComm(a, b) && OverlapInTime(a, b);',
     'return false && Subset(wire.hosts, other.hosts) && ShareComm(a, b) && OverlapInTime(a, b);'),
    ('merge: a slow network\'s suspect that the proxy wire names is the link', D + 'registry.cc',
     'return b.detector == "proxy.wire" && Subset(b.hosts, a.hosts)', 'return false && Subset(b.hosts, a.hosts)'),
    ('proxy wire: the fewest ends that explain every slow wire (greedy cover)', D + 'proxy_wire.cc',
     'return s->x->from == best || s->x->to == best; });', 'return s->x->from == best && s->x->to == best; });\n      slow[best] = 0;'),
    ('proxy wire: a culprit end is mostly slow', D + 'proxy_wire.cc',
     'if (n < kMinSlowInBin || slow[p] < kMostlySlow * all[p]) continue;', 'if (n < kMinSlowInBin) continue;'),
    ('host stall: a stall\'s own echo does not explain it', D + 'comm_detect.cc',
     'waited -= led.EchoOf(', '(void)led.EchoOf('),
    ('merge: one rank\'s stall from records and steps', D + 'registry.cc',
     'return OverlapInTime(a, b) && ShareRank(a, b); }},', 'return false && ShareRank(a, b); }},'),
    ('symptom: a step regression or jitter is the impact of the cause it coincides with', D + 'registry.cc',
     'return overlap > 0 && 2 * overlap', 'return false && overlap > 0 && 2 * overlap'),
    ('steps: a stall is whose own time grew, a minority', D + 'steps.cc',
     'if (2 * st.ranks.size() > it->second.size()) st.ranks.clear();', ''),
    ('same work: only communicators that run collectives (not pipeline ones)', D + 'comm_data.cc',
     'if (!collective[i] || c.n_ranks < 3', 'if (c.n_ranks < 3'),
    ('late arrival refuted: compute above its peers is not flat', D + 'compute_growth.cc',
     'return ComputeAbovePeers(p, rank, groups) >= p.threshold;',
     'return false && ComputeAbovePeers(p, rank, groups) >= p.threshold;'),
    ('steps: stalls of the same ranks are one finding, another rank\'s its own', D + 'steps.cc',
     'stalls[st.ranks].push_back(std::move(st));', 'stalls[{}].push_back(std::move(st));'),
    ('steps: the first steps\' spikes are judged against the steps after them', D + 'steps.cc',
     'for (size_t i = 0; i < x.size(); ++i) {\n    // The steps before it',
     'for (size_t i = n; i < x.size(); ++i) {\n    // The steps before it'),
    ('steps: a first-steps spike of every rank is the warm-up, no jitter', D + 'steps.cc',
     'if (i >= static_cast<size_t>(o.window)) unexplained.push_back(i);', 'unexplained.push_back(i);'),
    ('host stall: one of coincident stalls stands out only over echoes\' material waits', D + 'comm_detect.cc',
     'least < 0.5 * next && next >= 0.25 * value', 'least < 0.5 * next && next >= 0 * value'),
    ('late arrival: a root waiting in a shared communicator for a rank others explain follows it',
     D + 'late_arrival.cc', 'if (!waits_there || (!root && strength < lasts[r->proc])) {',
     'if (!waits_there || !root) {'),
    ('merge: a slow network\'s late host is no link when late inside itself', D + 'registry.cc',
     'b.Number("late_within_its_host", 0) == 0;', 'true;'),
    ('late arrival: a host\'s late members are explained together', D + 'late_arrival.cc',
     '    if (e.host_test >= 0) {\n      const auto [host_waited', '    if (false) {\n      const auto [host_waited'),
    ('hang: the group that stopped where a host mate moved on, the others level with theirs, is where it began',
     D + 'hang.cc', 'groups.size() > 1 ? GroupThatStoppedAlone', 'groups.size() > 1 && false ? GroupThatStoppedAlone'),
    ('late arrival: ... only where it is late mostly while that rank is', D + 'late_arrival.cc',
     "!LateWithout(*r, late_in.at({y->proc, y->comm}));", "(true || !LateWithout(*r, late_in.at({y->proc, y->comm})));"),
    ('late arrival: a rank late inside a host whose other ranks are late too is a finding of its own', D + 'late_arrival.cc',
     'late_procs[h].size() > 1 && d.comms', 'false && d.comms'),
    ('late arrival: a host\'s lateness across hosts whose every late rank is late inside it is those ranks\'',
     D + 'late_arrival.cc', 'if (who >= 0 || late_procs[h].size() < 2 ||', 'if (true || late_procs[h].size() < 2 ||'),
    ('late arrival: a host\'s lateness where one of its late members is late inside it is that member\'s', D + 'late_arrival.cc',
     'const bool inside = late_inside(x.proc, xa, xb);', 'const bool inside = false && late_inside(x.proc, xa, xb);'),
    ('late arrival: ... late inside it by enough to be a root', D + 'late_arrival.cc',
     'hosts.size() == 1 && y.wait_share >= o.min_wait_share)', 'hosts.size() == 1)'),
    ('late arrival: a sibling late as much outside a rank\'s run as inside explains none of it', D + 'late_arrival.cc',
     '        !LateWithout(x, e_run))', '        true)'),
    ('merge: a rank late inside a host another finding names more ranks of is a straggler of its own', D + 'registry.cc',
     '!LateInsideASlowHost(a, b) && !LateInsideASlowHost(b, a) &&',
     '(true || (!LateInsideASlowHost(a, b) && !LateInsideASlowHost(b, a))) &&'),
    ('merge: one slow network narrowed over time is one finding among the fewer hosts', D + 'registry.cc',
     'OverlapInTime(a, b);\n}\n\nvoid KeepTheFewerHosts', 'OverlapInTime(a, b) && false;\n}\n\nvoid KeepTheFewerHosts'),
    ('merge: a slow network whose every slow communicator waits for a rank late inside its host is that rank\'s',
     D + 'registry.cc', 'Subset(network.comms, straggler.comms) && OverlapInTime(straggler, network);',
     'Subset(network.comms, straggler.comms) && OverlapInTime(straggler, network) && false;'),
    ('merge: two findings of different ranks of a host, one late inside it, are two stragglers', D + 'registry.cc',
     '!TwoRanksOneLateInsideItsHost(a, b);', '(true || !TwoRanksOneLateInsideItsHost(a, b));'),
    ('late arrival: sampled records tested again among the members of communicators whose records wait',
     D + 'late_arrival.cc', 'Scan(cs, waiting_tests, W, o, true, true, &events);',
     'Scan(cs, tests + 0 * waiting_tests, W, o, true, true, &events);'),
    ('late arrival: ... charged only for runs between windows with trials', D + 'late_arrival.cc',
     'windows += x.total > 0;', 'windows += 1 + 0 * x.total;'),
    ('late arrival: ... where a record falls short by 3x the collective\'s spread', D + 'late_arrival.cc',
     'waiting_cells, &waiting.material);', 'waiting_cells, waiting.material.empty() ? nullptr : nullptr);'),
    ('hang from records: a lag within a sampled series\' widest skip is no hang', D + 'comm_detect.cc',
     'if (done[{c, op}] < mx - skipped[{c, op}] && !moved_on', 'if (done[{c, op}] < mx + 0 * skipped[{c, op}] && !moved_on'),
    ('hang from records: one op behind while another op of its communicator is level and later is no hang',
     D + 'comm_detect.cc', '&& !moved_on(c, op)) lag.push_back(c);', '&& (true || !moved_on(c, op))) lag.push_back(c);'),
    ('slow link: sampled records of members that waited for one at the usual speed are left out', D + 'comm_detect.cc',
     'if (j - i >= 3) {', 'if (false && j - i >= 3) {'),
    ('slow link: ... where the others\' records nearest in time are slow', D + 'comm_detect.cc',
     'const size_t k = std::max<size_t>(3, by_proc.size() - 1);',
     'const size_t k = std::max<size_t>(3, by_proc.size() - 1) * 0 + others.size();'),
]


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, shell=True, capture_output=True, text=True)


def check():
    """Every rule's text occurs exactly once in its file (else the mutation run skips it)."""
    files = {path: open(os.path.join(ROOT, path)).read() for _, path, _, _ in RULES}
    counts = [(name, path, files[path].count(text)) for name, path, text, _ in RULES]
    stale = [f'{name}: {path} holds its text {n} times' for name, path, n in counts if n != 1]
    for line in stale:
        print('STALE ' + line)
    print(f'{len(RULES) - len(stale)} of {len(RULES)} rules name their code')
    return 1 if stale else 0


def main():
    args = [a for a in sys.argv[1:]]
    if '--check' in args:
        sys.exit(check())
    build = os.path.abspath(args[0]) if args and not args[0].startswith('--') else os.path.join(ROOT, 'build')
    with_eval = '--eval' in args
    only = args[args.index('--only') + 1] if '--only' in args else ''
    tests = 'diagnose_' + ('|eval_test' if with_eval else '')
    # Only the test programs that run: relinking every command and test for each rule is most of
    # the time.
    listed = run('ctest -N', build).stdout
    targets = sorted(set(re.findall(r'Test +#\d+: (diagnose_(?:\w+_)?test)\.', listed)))
    if re.search(r'Test +#\d+: diagnose_cases_test$', listed, re.M):
        targets.append('collscope')  # the cases run the command itself
    if with_eval:
        targets.append('eval_test')
    results = []
    for name, path, text, repl in RULES:
        if only and not any(o in name for o in only.split('|')):
            continue
        full = os.path.join(ROOT, path)
        original = open(full).read()
        if original.count(text) != 1:
            results.append((name, 'NOT FOUND: the rule moved; update bench/rule_mutations.py'))
            print(f'{name}: {results[-1][1]}', flush=True)
            continue
        try:
            open(full, 'w').write(original.replace(text, repl))
            b = run('cmake --build . -j2 --target ' + ' '.join(targets), build)
            if b.returncode != 0:
                results.append((name, 'BUILD FAILED'))
                print(f'{name}: {results[-1][1]}', flush=True)
                continue
            t = run(f'ctest -j2 -R "{tests}" --output-on-failure', build)
            failed = sorted(set(re.findall(r'\d+ - (\S+) \(Failed\)', t.stdout)))
            results.append((name, ', '.join(failed) if failed else 'NO TEST FAILS'))
        finally:
            open(full, 'w').write(original)
        print(f'{name}: {results[-1][1]}', flush=True)
    run('cmake --build . -j2', build)
    bad = [r for r in results if not r[1] or r[1].startswith(('NO TEST', 'NOT FOUND', 'BUILD'))]
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
