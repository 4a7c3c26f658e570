#include "analysis/diagnose/hang.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <tuple>

namespace collscope::diagnose {

using readers::FrDump;
using readers::FrEntry;

namespace {

// Per rank and process group: the last enqueued and last completed collective sequence numbers.
struct PgState {
  int64_t enq = -1, done = -1;
};

// The hang finding of the collective `key` (process group, sequence number), whose roots never
// joined it: `e` is a waiter's entry for it.
Finding FrHangFinding(const std::vector<FrDump>& dumps, const std::pair<std::string, int64_t>& key,
                      const std::set<int>& roots, const std::set<int>& victims,
                      const std::map<int, std::set<int>>& waiters,
                      const std::map<int, std::map<std::string, PgState>>& st, const std::set<int>& without_dump,
                      const FrEntry& e) {
  Finding f;
  f.kind = Kind::kHang;
  f.detector = "flight_recorder.wait_graph";
  f.ranks.assign(roots.begin(), roots.end());
  f.victims.assign(victims.begin(), victims.end());
  f.comms = {key.first};
  // The dumps show a rank behind; a rank without a dump is inferred, and one of several such
  // ranks may be the only culprit.
  size_t inferred = 0;
  for (int r : f.ranks) inferred += without_dump.count(r);
  f.confidence = inferred == 0 ? 0.95 : 0.8 / static_cast<double>(inferred);
  f.start_us = e.time_created_ns / 1000;
  f.end_us = f.start_us;
  for (const FrDump& d : dumps)
    for (const FrEntry& x : d.entries) f.end_us = std::max(f.end_us, x.time_created_ns / 1000);
  std::set<int> direct;
  for (int r : f.ranks)
    if (auto w = waiters.find(r); w != waiters.end()) direct.insert(w->second.begin(), w->second.end());
  f.Add("collective_seq_id", static_cast<double>(key.second));
  f.AddText("process_group", key.first + " " + e.pg_desc);
  f.AddText("op", e.profiling_name);
  f.AddText("input_sizes", e.input_sizes);
  f.AddText("dtype", e.input_dtypes);
  f.Add("direct_waiters", static_cast<double>(direct.size()));
  for (int r : f.ranks) {
    auto rs = st.find(r);
    if (rs == st.end()) continue;
    auto it = rs->second.find(key.first);
    if (it != rs->second.end()) f.Add("last_enqueued_rank_" + std::to_string(r), static_cast<double>(it->second.enq));
  }
  std::vector<int> undumped_roots;
  for (int r : f.ranks)
    if (without_dump.count(r)) undumped_roots.push_back(r);
  if (!undumped_roots.empty()) f.AddText("no_dump_ranks", RankList(undumped_roots));
  const std::string no_dump =
      undumped_roots.empty() ? ""
      : undumped_roots.size() == f.ranks.size()
          ? std::string(f.ranks.size() > 1 ? " (they left no Flight Recorder dump: died or hung before writing one?)"
                                           : " (it left no Flight Recorder dump: died or hung before writing one?)")
          : " (" + RankList(undumped_roots) + " left no Flight Recorder dump)";
  f.summary = std::string(f.ranks.size() > 1 ? "Ranks " : "Rank ") + RankList(f.ranks) + no_dump +
              " never joined " + e.profiling_name + " (" + e.input_sizes + " " + e.input_dtypes +
              ") #" + std::to_string(key.second) + " of process group " + key.first + " (" +
              e.pg_desc + "); " + std::to_string(direct.size()) + " peer(s) wait in it and " +
              std::to_string(f.victims.size()) +
              " rank(s) are blocked behind it: inspect what those ranks were doing (stack, GPU "
              "errors in dmesg/XID).";
  return f;
}

}  // namespace

std::vector<Finding> AnalyzeFlightRecorder(const std::vector<FrDump>& dumps) {
  std::vector<Finding> out;
  std::map<int, std::map<std::string, PgState>> st;
  std::map<std::string, readers::FrPg> pgs;
  std::map<int, const FrDump*> by_rank;
  for (const FrDump& d : dumps) {
    by_rank[d.rank] = &d;
    for (const auto& [name, pg] : d.pgs) pgs.emplace(name, pg);
    std::map<int64_t, std::string> local;  // local pg_id -> name, from the entries
    for (const FrEntry& e : d.entries) {
      local[e.pg_id] = e.pg_name;
      if (e.is_p2p) continue;
      PgState& s = st[d.rank][e.pg_name];
      s.enq = std::max(s.enq, e.collective_seq_id);
      if (e.state == "completed") s.done = std::max(s.done, e.collective_seq_id);
    }
    for (const auto& [id, ps] : d.status) {
      auto it = local.find(id);
      if (it == local.end()) continue;
      PgState& s = st[d.rank][it->second];
      s.enq = std::max(s.enq, ps.last_enqueued);
      s.done = std::max(s.done, ps.last_completed);
    }
  }
  // Each rank's blocking op: its oldest pending (enqueued, not completed) collective, and the
  // members of its group that the dumps do not show joining it. A member without a dump (it died
  // before writing one, or its file is empty or unreadable) cannot show it: such members are
  // named only when the dumps show no rank behind anywhere, since then nothing else explains the
  // waits (a rank that is behind may itself wait in an op that the undumped joined).
  struct Block { const FrEntry* e = nullptr; std::vector<int> missing, undumped; };
  std::map<int, Block> block;
  for (const FrDump& d : dumps) {
    const FrEntry* oldest = nullptr;
    for (const FrEntry& e : d.entries) {
      if (e.is_p2p) continue;
      const PgState& s = st[d.rank][e.pg_name];
      if (e.collective_seq_id <= s.done || e.state == "completed") continue;
      if (!oldest || e.time_created_ns < oldest->time_created_ns ||
          (e.time_created_ns == oldest->time_created_ns && e.record_id < oldest->record_id))
        oldest = &e;
    }
    if (!oldest) continue;
    Block b;
    b.e = oldest;
    auto pg = pgs.find(oldest->pg_name);
    std::vector<int> undumped;
    if (pg != pgs.end())
      for (int m : pg->second.ranks) {
        if (m == d.rank) continue;
        if (!by_rank.count(m)) {
          undumped.push_back(m);
          continue;
        }
        auto it = st[m].find(oldest->pg_name);
        const int64_t enq = it == st[m].end() ? -1 : it->second.enq;
        if (enq < oldest->collective_seq_id) b.missing.push_back(m);
      }
    b.undumped = std::move(undumped);
    block[d.rank] = b;
  }
  std::set<int> without_dump;
  if (std::all_of(block.begin(), block.end(), [](const auto& kv) { return kv.second.missing.empty(); }))
    for (auto& [r, b] : block) {
      b.missing = b.undumped;
      without_dump.insert(b.undumped.begin(), b.undumped.end());
    }
  // Roots: waited-on ranks that wait on nobody.
  std::map<int, std::set<int>> waiters;  // root candidate -> ranks waiting on it directly
  for (auto& [r, b] : block)
    for (int m : b.missing) waiters[m].insert(r);
  std::set<int> roots;
  for (auto& [m, w] : waiters)
    if (!block.count(m) || block[m].missing.empty()) roots.insert(m);
  if (roots.empty())
    for (auto& [m, w] : waiters) roots.insert(m);  // a cycle: report every waited-on rank
  // Group roots by the collective the most waiters are blocked in.
  std::map<std::pair<std::string, int64_t>, std::pair<std::set<int>, std::set<int>>> groups;
  std::map<std::pair<std::string, int64_t>, const FrEntry*> op_of;
  for (int root : roots) {
    std::map<std::pair<std::string, int64_t>, int> votes;
    for (int w : waiters[root]) {
      const FrEntry* e = block[w].e;
      votes[{e->pg_name, e->collective_seq_id}]++;
      op_of.emplace(std::make_pair(e->pg_name, e->collective_seq_id), e);  // lowest waiter's entry
    }
    auto best = std::max_element(votes.begin(), votes.end(),
                                 [](auto& a, auto& b) { return a.second < b.second; });
    auto& g = groups[best->first];
    g.first.insert(root);
  }
  for (auto& [key, g] : groups) {
    // Victims: every rank that transitively waits on these roots.
    std::set<int> victims;
    std::vector<int> todo(g.first.begin(), g.first.end());
    while (!todo.empty()) {
      const int x = todo.back();
      todo.pop_back();
      for (int w : waiters[x])
        if (!g.first.count(w) && victims.insert(w).second) todo.push_back(w);
    }
    out.push_back(FrHangFinding(dumps, key, g.first, victims, waiters, st, without_dump, *op_of[key]));
  }
  return out;
}

namespace {

// A process's role in the collective its communicator is stuck in.
enum class Role { kJoined, kNeverJoined, kOtherOp, kOtherSize, kNotStarted };

struct CommView {
  std::string id, name;
  int n_ranks = 0;
  std::map<int, std::pair<int, const InflightComm*>> members;  // comm rank -> (process, its view)
};

std::string OpText(const InflightOp& o) {
  return o.op + " #" + std::to_string(o.sn) + " (" + std::to_string(o.bytes) + " B)";
}
// Where a process waits on another: the communicator and the op.
struct Edge {
  std::string comm;
  const InflightOp* op;
};

// Who waits on whom in a job whose state files were taken while it hung. Its communicator views
// point into `states`, which stays put once they are built.
struct WaitGraph {
  std::vector<InflightState> states;
  std::vector<int> label;                               // rank label per process
  std::map<std::string, CommView> comms;
  std::vector<std::set<int>> waits_on;                  // process -> processes it waits on
  std::vector<std::set<int>> waiters;                   // process -> processes waiting on it, directly
  std::map<std::pair<int, int>, Edge> why;              // (waiter, waited-on) -> where
  std::vector<std::map<std::string, Role>> role;        // process -> comm -> role in its stuck collective
  std::map<std::string, std::vector<int>> missing;      // comm -> comm ranks without a state file
  std::map<std::string, const InflightOp*> target_of;   // comm -> the collective it is stuck in
  std::map<std::string, int> n_blockers;                // comm -> members missing from that collective
  int64_t last_heartbeat = 0;

  int n() const { return static_cast<int>(states.size()); }
  // A heartbeat well behind the others' means the process died or froze before the end.
  bool Stale(int p) const { return last_heartbeat - states[p].heartbeat_ts_us > 5'000'000; }
  void AddEdge(int a, int b, const std::string& comm, const InflightOp* op) {
    if (a == b) return;
    waits_on[a].insert(b);
    why.emplace(std::make_pair(a, b), Edge{comm, op});
  }
};

// A process's role in the collective `comm` is stuck in (joined where none was recorded, as the
// graph's roles are read).
Role RoleOf(const WaitGraph& g, int p, const std::string& comm) {
  auto it = g.role[p].find(comm);
  return it == g.role[p].end() ? Role{} : it->second;
}

// Ops of a running job younger than `min_age_us` are the normal skew between members, not stuck.
std::vector<InflightState> WithoutYoungOps(const std::vector<InflightState>& input, const InflightOptions& options) {
  std::vector<InflightState> states = input;
  for (InflightState& s : states)
    for (InflightComm& c : s.comms) {
      if (c.finalized || s.status != "running") continue;
      std::erase_if(c.ops, [&](const InflightOp& o) { return s.heartbeat_ts_us - o.start_ts_us < options.min_age_us; });
    }
  return states;
}

// Rank labels and communicator views.
void LabelProcessesAndCommunicators(WaitGraph& g) {
  // Rank label per process: the launcher's global rank; without one, the process's rank in its
  // largest communicator (the world communicator's rank is the global rank in every launcher).
  g.label.assign(static_cast<size_t>(g.n()), -1);
  for (int p = 0; p < g.n(); ++p) {
    g.label[p] = g.states[p].global_rank;
    if (g.label[p] >= 0) continue;
    int best = 0;
    for (const InflightComm& c : g.states[p].comms)
      if (c.n_ranks > best) { best = c.n_ranks; g.label[p] = c.rank; }
  }
  // Communicators; a comm rank reported by two processes (a re-initialised communicator with
  // the same hash) keeps the fresher file.
  for (int p = 0; p < g.n(); ++p)
    for (const InflightComm& c : g.states[p].comms) {
      CommView& v = g.comms[c.id];
      v.id = c.id;
      if (v.name.empty()) v.name = c.name;
      v.n_ranks = std::max(v.n_ranks, c.n_ranks);
      auto it = v.members.find(c.rank);
      if (it == v.members.end() || g.states[it->second.first].heartbeat_ts_us < g.states[p].heartbeat_ts_us)
        v.members[c.rank] = {p, &c};
    }
}

// The collective communicator `id` is stuck in, and who waits on whom there.
void AddStuckCollective(WaitGraph& g, const std::string& id, const CommView& v) {
  // The collective this communicator is stuck in: the (op, sn) in flight at most members, the
  // earliest-started on a tie.
  std::map<std::pair<std::string, int64_t>, std::pair<int, int64_t>> votes;
  for (auto& [cr, m] : v.members)
    for (const InflightOp& o : m.second->ops)
      if (o.coll) {
        auto& vt = votes[{o.op, o.sn}];
        vt.second = vt.first == 0 ? o.start_ts_us : std::min(vt.second, o.start_ts_us);
        vt.first++;
      }
  if (!votes.empty()) {
    auto best = votes.begin();
    for (auto it = votes.begin(); it != votes.end(); ++it)
      if (it->second.first > best->second.first ||
          (it->second.first == best->second.first && it->second.second < best->second.second))
        best = it;
    const auto key = best->first;
    // Majority size of the joined members: a member that joined with another size mismatched.
    std::map<int64_t, int> sizes;
    const InflightOp* first = nullptr;
    bool any_started = false;
    for (auto& [cr, m] : v.members)
      for (const InflightOp& o : m.second->ops)
        if (o.coll && o.op == key.first && o.sn == key.second) {
          sizes[o.bytes]++;
          any_started |= o.channels_started > 0;
        }
    int64_t size = 0;
    int most = 0;
    for (auto& [b, n] : sizes)
      if (n > most) { most = n; size = b; }
    for (auto& [cr, m] : v.members)
      for (const InflightOp& o : m.second->ops)
        if (o.coll && o.op == key.first && o.sn == key.second && o.bytes == size &&
            (!first || o.start_ts_us < first->start_ts_us))
          first = &o;
    g.target_of[id] = first;
    std::vector<int> blockers;
    std::vector<int> joined;
    for (auto& [cr, m] : v.members) {
      const int p = m.first;
      const InflightOp* mine = nullptr;
      bool other = false;
      for (const InflightOp& o : m.second->ops)
        if (o.coll) {
          if (o.op == key.first && o.sn == key.second) mine = &o;
          else other = true;
        }
      Role r;
      if (mine && mine->bytes != size) r = Role::kOtherSize;
      else if (mine && any_started && mine->channels_started == 0 && mine->n_channels > 0) r = Role::kNotStarted;
      else if (mine) r = Role::kJoined;
      else if (other) r = Role::kOtherOp;
      else r = Role::kNeverJoined;
      g.role[p][id] = r;
      if (r == Role::kJoined) joined.push_back(p);
      else blockers.push_back(p);
    }
    for (int a : joined)
      for (int b : blockers) g.AddEdge(a, b, id, first);
    g.n_blockers[id] = static_cast<int>(blockers.size());
  }
}

// Pending point-to-point ops wait on a peer that has no matching op (Send <-> Recv aimed back at
// this member) in flight.
void AddPointToPointWaits(WaitGraph& g, const std::string& id, const CommView& v) {
  for (auto& [cr, m] : v.members)
    for (const InflightOp& o : m.second->ops) {
      if (o.coll || o.peer < 0) continue;
      auto peer = v.members.find(o.peer);
      if (peer == v.members.end()) continue;  // no state file: counted as missing
      bool matched = false;
      for (const InflightOp& q : peer->second.second->ops)
        if (!q.coll && q.peer == cr && q.op != o.op) matched = true;
      if (!matched) g.AddEdge(m.first, peer->second.first, id, &o);
    }
}

void BuildWaitGraph(WaitGraph& g) {
  LabelProcessesAndCommunicators(g);
  g.waits_on.assign(static_cast<size_t>(g.n()), {});
  g.role.assign(static_cast<size_t>(g.n()), {});
  for (auto& [id, v] : g.comms) {
    for (int r = 0; r < v.n_ranks; ++r)
      if (!v.members.count(r)) g.missing[id].push_back(r);
    AddStuckCollective(g, id, v);
    AddPointToPointWaits(g, id, v);
  }
  g.waiters.assign(static_cast<size_t>(g.n()), {});
  for (int a = 0; a < g.n(); ++a)
    for (int b : g.waits_on[a]) g.waiters[b].insert(a);
  for (const InflightState& s : g.states) g.last_heartbeat = std::max(g.last_heartbeat, s.heartbeat_ts_us);
}

// Processes others wait on that wait on nobody; in a cycle (two members each in the other's
// missing op), every waited-on one.
std::set<int> Roots(const WaitGraph& g) {
  std::set<int> roots;
  for (int p = 0; p < g.n(); ++p)
    if (!g.waiters[p].empty() && g.waits_on[p].empty()) roots.insert(p);
  if (roots.empty())
    for (int p = 0; p < g.n(); ++p)
      if (!g.waiters[p].empty()) roots.insert(p);
  return roots;
}

using OwnOp = std::pair<const InflightOp*, std::string>;  // an op and its communicator

// A root with ops of its own in flight (which all their peers joined, or it would wait on
// someone) is stuck mid-transfer there rather than absent: each process's oldest op.
std::vector<OwnOp> OldestOwnOps(const WaitGraph& g) {
  std::vector<OwnOp> own(static_cast<size_t>(g.n()), {nullptr, {}});
  for (int p = 0; p < g.n(); ++p)
    for (const InflightComm& c : g.states[p].comms)
      for (const InflightOp& o : c.ops)
        if (!own[p].first || o.start_ts_us < own[p].first->start_ts_us) own[p] = {&o, c.id};
  return own;
}

// Roots stuck in a transfer every party joined go to `stuck_roots`; absent ones are grouped by the
// collective they failed to join.
void GroupRoots(const WaitGraph& g, const std::set<int>& roots, const std::vector<OwnOp>& own,
                std::map<std::string, std::set<int>>* groups, std::set<int>* stuck_roots) {
  for (int r : roots) {
    if (own[r].first) {
      auto ro = g.role[r].find(own[r].second);
      if (!own[r].first->coll || (ro != g.role[r].end() && ro->second == Role::kJoined)) {
        stuck_roots->insert(r);
        continue;
      }
    }
    // The collective it failed to join is the one where it is missing alone (or with the fewest
    // others): a job blocked behind it piles up in later collectives, e.g. the step's world
    // AllReduce, where its blocked peers are missing too; then the earliest.
    const Edge* first = nullptr;
    auto blockers = [&](const Edge& e) { return g.n_blockers.count(e.comm) ? g.n_blockers.at(e.comm) : 1; };
    auto start = [](const Edge& e) { return e.op ? e.op->start_ts_us : INT64_MAX; };
    // A pipeline receiver posts its Recv early and waits by design: collectives come first.
    auto p2p = [](const Edge& e) { return e.op && !e.op->coll; };
    for (int w : g.waiters[r]) {
      const Edge& e = g.why.at({w, r});
      if (!first || std::make_tuple(p2p(e), blockers(e), start(e)) < std::make_tuple(p2p(*first), blockers(*first), start(*first)))
        first = &e;
    }
    (*groups)[first->comm].insert(r);
  }
}

// The finding of a group of roots that never joined `comm`'s stuck collective (or joined it
// otherwise): them, who waits on them, and how they differ from the members that joined.
Finding NeverJoinedFinding(const WaitGraph& g, const std::string& comm, const std::set<int>& group) {
  const std::set<int>& rs = group;
  std::set<int> victims;
  std::vector<int> todo(rs.begin(), rs.end());
  while (!todo.empty()) {
    const int x = todo.back();
    todo.pop_back();
    for (int w : g.waiters[x])
      if (!rs.count(w) && victims.insert(w).second) todo.push_back(w);
  }
  const CommView& v = g.comms.at(comm);
  // The op of the finding: the communicator's stuck collective, else a waiter's p2p op.
  const InflightOp* op = g.target_of.count(comm) ? g.target_of.at(comm) : nullptr;
  for (int r : rs)
    for (int w : g.waiters[r])
      if (!op && g.why.at({w, r}).comm == comm) op = g.why.at({w, r}).op;
  Finding f;
  f.kind = Kind::kHang;
  f.detector = "inflight.state";
  f.confidence = 0.95;
  f.comms = {comm};
  for (int r : group)
    for (int w : g.waiters[r]) f.comms.push_back(g.why.at({w, r}).comm);
  SortUnique(&f.comms);
  std::vector<std::string> never, other, size, not_started;
  std::set<std::string> hosts;
  for (int r : rs) {
    f.ranks.push_back(g.label[r]);
    hosts.insert(g.states[r].hostname);
    const std::string who = std::to_string(g.label[r]);
    auto ro = g.role[r].find(comm);
    const Role rl = ro == g.role[r].end() ? Role::kNeverJoined : ro->second;
    if (rl == Role::kOtherSize) {
      int64_t bytes = 0;
      for (const InflightComm& c : g.states[r].comms)
        if (c.id == comm)
          for (const InflightOp& o : c.ops)
            if (o.coll && op && o.op == op->op && o.sn == op->sn) bytes = o.bytes;
      size.push_back(who + " (" + std::to_string(bytes) + " B)");
    }
    else if (rl == Role::kOtherOp) {
      std::string what;
      for (const InflightComm& c : g.states[r].comms)
        if (c.id == comm)
          for (const InflightOp& o : c.ops)
            if (o.coll) what = OpText(o);
      other.push_back(who + " in " + what);
    } else if (rl == Role::kNotStarted) not_started.push_back(who);
    else never.push_back(who);
  }
  SortUnique(&f.ranks);
  for (int w : victims) f.victims.push_back(g.label[w]);
  SortUnique(&f.victims);
  f.hosts.assign(hosts.begin(), hosts.end());
  f.start_us = op ? op->start_ts_us : g.last_heartbeat;
  f.end_us = g.last_heartbeat;
  std::set<int> direct;
  for (int r : rs) direct.insert(g.waiters[r].begin(), g.waiters[r].end());
  std::vector<int> direct_ranks;
  for (int w : direct) direct_ranks.push_back(g.label[w]);
  SortUnique(&direct_ranks);
  // Members of the stuck collective that are part-way through it: victims, but which channels
  // finished tells where the transfer stopped.
  std::vector<int> partial;
  for (auto& [cr, m] : v.members)
    for (const InflightOp& o : m.second->ops)
      if (op && o.coll && o.op == op->op && o.sn == op->sn && o.channels_stopped > 0) partial.push_back(g.label[m.first]);
  SortUnique(&partial);
  auto join = [](const std::vector<std::string>& xs) {
    std::string s;
    for (const std::string& x : xs) s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  const std::string where = (op ? OpText(*op) : std::string("its pending operation")) + " of communicator " +
                            comm + (v.name.empty() ? "" : " (" + v.name + ")");
  if (op) {
    f.AddText("op", op->op);
    f.Add("sn", static_cast<double>(op->sn));
    f.Add("msg_size_bytes", static_cast<double>(op->bytes));
  }
  f.AddText("comm_name", v.name);
  f.Add("direct_waiters", static_cast<double>(direct.size()));
  f.AddText("waiting_ranks", RankList(direct_ranks));
  if (!never.empty()) f.AddText("never_joined", join(never));
  if (!other.empty()) f.AddText("issued_other_op", join(other));
  if (!size.empty()) f.AddText("issued_other_size", join(size));
  if (!not_started.empty()) f.AddText("kernel_never_started", join(not_started));
  if (!partial.empty()) f.AddText("partly_transferred_ranks", RankList(partial));
  if (g.missing.count(comm)) f.Add("members_without_state_file", static_cast<double>(g.missing.at(comm).size()));
  std::vector<int> stale_ranks;
  for (int r : rs)
    if (g.Stale(r)) stale_ranks.push_back(g.label[r]);
  if (!stale_ranks.empty()) f.AddText("stale_heartbeat_ranks", RankList(stale_ranks));
  std::string what;
  if (!never.empty()) what = " never joined " + where;
  else if (!other.empty()) what = " issued a different collective (" + join(other) + ") where its peers are in " + where;
  else if (!size.empty()) what = " joined " + where + " with a different message size";
  else what = " enqueued " + where + " but its GPU never started the kernel (busy or stuck in earlier work)";
  f.summary = std::string(f.ranks.size() > 1 ? "Ranks " : "Rank ") + RankList(f.ranks) + what + "; " +
              std::to_string(direct.size()) + " peer(s) wait on it directly and " +
              std::to_string(f.victims.size()) + " rank(s) are blocked behind it" +
              (stale_ranks.empty() ? "" : " (its state file stopped updating: the process died or froze)") +
              ": inspect what those ranks were doing (stack, GPU errors in dmesg/XID).";
  return f;
}

// A stuck collective whose missing members have no state file (or no entry for this
// communicator: a process that died, or a plugin that dropped it): they are the likely root
// cause, named by communicator rank since nothing maps them to a process.
void AddMissingStateFindings(const WaitGraph& g, std::set<std::string>* explained, std::vector<Finding>* out) {
  for (auto& [id, v] : g.comms) {
    if (explained->count(id) || !g.target_of.count(id) || !g.missing.count(id)) continue;
    const InflightOp* op = g.target_of.at(id);
    Finding f;
    f.kind = Kind::kHang;
    f.detector = "inflight.state";
    f.comms = {id};
    f.confidence = 0.7;
    for (auto& [cr, m] : v.members)
      if (RoleOf(g, m.first, id) == Role::kJoined) f.victims.push_back(g.label[m.first]);
    SortUnique(&f.victims);
    std::vector<int> absent = g.missing.at(id);
    f.start_us = op->start_ts_us;
    f.end_us = g.last_heartbeat;
    f.AddText("op", op->op);
    f.Add("sn", static_cast<double>(op->sn));
    f.Add("msg_size_bytes", static_cast<double>(op->bytes));
    f.AddText("comm_name", v.name);
    f.AddText("comm_ranks_without_state", RankList(absent));
    f.summary = "Communicator " + id + (v.name.empty() ? "" : " (" + v.name + ")") + " is stuck in " + OpText(*op) +
                ": ranks " + RankList(f.victims) + " wait in it, and communicator rank(s) " + RankList(absent) +
                " left no state for it (process gone, or no collscope plugin): those processes are the likely "
                "root cause.";
    explained->insert(id);
    out->push_back(std::move(f));
  }
}

struct Stuck {
  std::string comm;
  const InflightOp* op;
  std::vector<int> procs;
};

// Transfers every party joined that never finish: the ones the stuck roots are in, and ones
// nobody waits on from elsewhere (the whole job stuck in them). Collectives whose members all
// joined one op, and Send/Recv pairs both posted. They make one finding: a dead link stops every
// transfer through it (and the pipeline neighbour waiting on such a transfer is no root cause),
// so the hosts common to all of them are where to look.
std::vector<Stuck> StuckTransfers(const WaitGraph& g, const std::set<int>& stuck_roots, const std::vector<OwnOp>& own,
                                  const std::set<std::string>& explained) {
  std::vector<Stuck> stuck;
  std::set<std::string> seen;  // comm + op, or comm + pair
  auto add_coll = [&](const std::string& id) {
    const InflightOp* op = g.target_of.at(id);
    if (!seen.insert(id + " c " + op->op + " " + std::to_string(op->sn)).second) return;
    Stuck st{id, op, {}};
    for (auto& [cr, m] : g.comms.at(id).members)
      if (RoleOf(g, m.first, id) == Role::kJoined) st.procs.push_back(m.first);
    stuck.push_back(std::move(st));
  };
  auto add_pair = [&](const std::string& id, int cr, const InflightOp& o) {
    const CommView& v = g.comms.at(id);
    auto peer = v.members.find(o.peer);
    if (peer == v.members.end() || !v.members.count(cr)) return;
    if (!seen.insert(id + " p " + std::to_string(std::min(cr, o.peer)) + " " + std::to_string(std::max(cr, o.peer))).second)
      return;
    stuck.push_back({id, &o, {v.members.at(cr).first, peer->second.first}});
  };
  for (int r : stuck_roots) {
    const auto& [op, id] = own[r];
    if (op->coll) {
      add_coll(id);
      continue;
    }
    for (const InflightComm& c : g.states[r].comms)
      if (c.id == id) add_pair(id, c.rank, *op);
  }
  for (auto& [id, v] : g.comms) {
    if (explained.count(id) || g.missing.count(id)) continue;
    bool free = true;  // no member waits on anyone (else the wait graph above explains it)
    for (auto& [cr, m] : v.members) free &= g.waits_on[m.first].empty();
    if (!free) continue;
    if (g.target_of.count(id)) {
      bool all_joined = true;
      for (auto& [cr, m] : v.members) all_joined &= RoleOf(g, m.first, id) == Role::kJoined;
      if (all_joined) add_coll(id);
    }
    for (auto& [cr, m] : v.members)
      for (const InflightOp& o : m.second->ops)
        if (!o.coll && o.peer > cr) add_pair(id, cr, o);  // matched: an unmatched one would wait
  }
  std::sort(stuck.begin(), stuck.end(), [](const Stuck& a, const Stuck& b) { return a.op->start_ts_us < b.op->start_ts_us; });
  return stuck;
}

// The one finding of every stuck transfer (StuckTransfers: sorted, not empty): the hosts they all
// go through, or the members of one collective that finished the fewest channels.
Finding StuckTransferFinding(const WaitGraph& g, const std::vector<Stuck>& stuck) {
  std::set<std::string> common, all;
  std::set<int> procs;
  for (size_t i = 0; i < stuck.size(); ++i) {
    std::set<std::string> hs;
    for (int p : stuck[i].procs) {
      hs.insert(g.states[p].hostname);
      procs.insert(p);
    }
    all.insert(hs.begin(), hs.end());
    if (i == 0) common = hs;
    std::set<std::string> keep;
    for (const std::string& h : common)
      if (hs.count(h)) keep.insert(h);
    common = std::move(keep);
  }
  const Stuck& s0 = stuck.front();
  const InflightOp* op = s0.op;
  Finding f;
  f.kind = Kind::kHang;
  f.detector = "inflight.state";
  // One collective whose members differ in progress: those that finished the fewest channels
  // hold the others up.
  int lo = INT32_MAX, hi = 0;
  auto stopped_of = [&](int p) {
    for (const InflightComm& c : g.states[p].comms)
      if (c.id == s0.comm)
        for (const InflightOp& o : c.ops)
          if (o.coll && o.op == op->op && o.sn == op->sn) return o.channels_stopped;
    return 0;
  };
  if (stuck.size() == 1 && op->coll)
    for (int p : s0.procs) {
      lo = std::min(lo, stopped_of(p));
      hi = std::max(hi, stopped_of(p));
    }
  std::string where;
  if (stuck.size() == 1 && op->coll && lo < hi) {
    for (int p : s0.procs)
      if (stopped_of(p) == lo) {
        f.ranks.push_back(g.label[p]);
        f.hosts.push_back(g.states[p].hostname);
      }
    f.confidence = 0.8;
    where = "; ranks " + RankList(f.ranks) + " finished the fewest channels (" + std::to_string(lo) + "/" +
            std::to_string(op->n_channels) + "): check their links and NICs";
  } else if (!common.empty() && common.size() < all.size()) {
    for (int p : procs)
      if (common.count(g.states[p].hostname)) f.ranks.push_back(g.label[p]);
    f.hosts.assign(common.begin(), common.end());
    f.confidence = 0.8;
    std::string hs;
    for (const std::string& h : common) hs += (hs.empty() ? "" : ", ") + h;
    where = "; every one of them goes through " + hs + ": check its links and NICs";
  } else if (all.size() == 1) {
    f.hosts.assign(all.begin(), all.end());
    f.confidence = 0.6;
    where = "; every party is on " + *all.begin() +
            ": check its links (COLLSCOPE_PROXY_EVENTS=1 shows which peer each channel waits on)";
  } else {
    // No host is singled out (both ends of every stuck transfer joined it): each is a suspect and
    // none the cause, since a healthy end named as the cause is a host drained for nothing.
    f.confidence = 0.6;
    std::string hs;
    for (const std::string& h : all) hs += (hs.empty() ? "" : ", ") + h;
    f.AddText(kSuspectHosts, hs);
    where = "; no host is singled out (" + hs +
            "), so check the links of every one of them (COLLSCOPE_PROXY_EVENTS=1 shows which peer each "
            "channel waits on)";
  }
  SortUnique(&f.ranks);
  SortUnique(&f.hosts);
  // Victims: the other parties, and everyone waiting on a party, transitively.
  std::set<int> victims;
  std::vector<int> todo(procs.begin(), procs.end());
  for (int p : procs) victims.insert(p);
  while (!todo.empty()) {
    const int x = todo.back();
    todo.pop_back();
    for (int w : g.waiters[x]) {
      f.comms.push_back(g.why.at({w, x}).comm);
      if (victims.insert(w).second) todo.push_back(w);
    }
  }
  for (int p : victims)
    if (!std::binary_search(f.ranks.begin(), f.ranks.end(), g.label[p])) f.victims.push_back(g.label[p]);
  SortUnique(&f.victims);
  for (const Stuck& st : stuck) f.comms.push_back(st.comm);
  SortUnique(&f.comms);
  f.start_us = op->start_ts_us;
  f.end_us = g.last_heartbeat;
  std::string transfers;
  for (size_t i = 0; i < stuck.size() && i < 8; ++i) {
    std::vector<int> parties;
    for (int p : stuck[i].procs) parties.push_back(g.label[p]);
    SortUnique(&parties);
    transfers += (i ? "; " : "") + RankList(parties) + " in " + OpText(*stuck[i].op) + " of " + stuck[i].comm;
  }
  if (stuck.size() > 8) transfers += "; ...";
  f.AddText("op", op->op);
  f.Add("sn", static_cast<double>(op->sn));
  f.Add("msg_size_bytes", static_cast<double>(op->bytes));
  f.AddText("comm_name", g.comms.at(s0.comm).name);
  f.AddText("stuck_mid_transfer", transfers);
  f.Add("stuck_transfers", static_cast<double>(stuck.size()));
  if (lo <= hi) {
    f.Add("min_channels_finished", lo);
    f.Add("max_channels_finished", hi);
  }
  const std::string what =
      stuck.size() == 1
          ? "Every party joined " + OpText(*op) + " of communicator " + s0.comm +
                (g.comms.at(s0.comm).name.empty() ? "" : " (" + g.comms.at(s0.comm).name + ")") + " and none finished it"
          : std::to_string(stuck.size()) + " transfers (from " + OpText(*op) + " of communicator " + s0.comm +
                ") were joined by every party and never finished";
  f.summary = what + ": stuck mid-transfer" + where + "; " + std::to_string(f.victims.size()) +
              " rank(s) are blocked.";
  return f;
}

// One hang stops the job. Groups of ranks that never joined different collectives at once
// are not that many culprits: each group is itself blocked outside NCCL, behind one cause the
// state files do not show (a transfer nobody tracked on a dead link, a host-side hang). They
// are one finding, and each group is the cause with a chance of one in their number.
void FoldGroupsThatNeverJoined(std::vector<Finding>& out) {
  std::vector<size_t> never;
  for (size_t i = 0; i < out.size(); ++i)
    for (const Evidence& e : out[i].evidence)
      if (e.key == "never_joined") { never.push_back(i); break; }
  if (never.size() >= 2) {
    Finding f = out[never[0]];
    std::set<std::string> common(f.hosts.begin(), f.hosts.end());
    std::string groups;
    for (size_t k = 0; k < never.size(); ++k) {
      const Finding& g = out[never[k]];
      if (k) {
        f.ranks.insert(f.ranks.end(), g.ranks.begin(), g.ranks.end());
        f.victims.insert(f.victims.end(), g.victims.begin(), g.victims.end());
        f.comms.insert(f.comms.end(), g.comms.begin(), g.comms.end());
        f.hosts.insert(f.hosts.end(), g.hosts.begin(), g.hosts.end());
        f.start_us = std::min(f.start_us, g.start_us);
        f.end_us = std::max(f.end_us, g.end_us);
        std::set<std::string> mine(g.hosts.begin(), g.hosts.end()), both;
        std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(both, both.end()));
        common = std::move(both);
      }
      if (k < 6) groups += (k ? "; " : "") + RankList(g.ranks);
    }
    SortUnique(&f.ranks);
    SortUnique(&f.victims);
    std::vector<int> v;
    std::set_difference(f.victims.begin(), f.victims.end(), f.ranks.begin(), f.ranks.end(), std::back_inserter(v));
    f.victims = std::move(v);
    SortUnique(&f.comms);
    SortUnique(&f.hosts);
    f.confidence = out[never[0]].confidence / static_cast<double>(never.size());
    f.Add("never_joined_groups", static_cast<double>(never.size()));
    std::string shared;
    for (const std::string& h : common) shared += (shared.empty() ? "" : ", ") + h;
    f.AddText("hosts_all_groups_share", shared.empty() ? "none" : shared);
    f.summary = std::to_string(never.size()) + " groups of ranks (" + groups + (never.size() > 6 ? "; ..." : "") +
                ") never joined their communicators' collectives at the same time: one hang stops a job, so they "
                "are more likely all blocked behind one cause the state files do not show (a dead link under an "
                "untracked transfer, a host-side hang) than " + std::to_string(never.size()) + " faults; " +
                (shared.empty() ? "they share no host, so check the links and hosts between them"
                                : "every group involves " + shared + ": check it first") + ".";
    for (size_t k = never.size(); k-- > 0;) out.erase(out.begin() + static_cast<std::ptrdiff_t>(never[k]));
    out.push_back(std::move(f));
  }
}

// One hang stops a job, and a group that never joined its collective may be stopped behind
// another: blocked outside NCCL on an input that group never sent. Ranks of one host that share a
// communicator (tensor parallelism) run in lockstep on the same inputs: where every one of them
// stopped at the same operation, they wait on a shared input; where one stopped and a host mate
// moved on past it, that one stopped on its own. When exactly one group stopped on its own and
// every other stopped level with all its host mates, the hang began in that group (its
// communicator); else "". No clock is compared: hosts' clocks differ.
std::string GroupThatStoppedAlone(const WaitGraph& g, const std::map<std::string, std::set<int>>& groups) {
  std::set<int> never;  // the processes of every group
  for (const auto& [comm, group] : groups) never.insert(group.begin(), group.end());
  std::string alone;
  for (const auto& [comm, group] : groups) {
    bool on_its_own = false, level = true;
    for (int p : group) {
      bool host_comm = false;
      for (const InflightComm& mine : g.states[static_cast<size_t>(p)].comms) {
        if (!g.comms.count(mine.id)) continue;
        const CommView& v = g.comms.at(mine.id);
        bool one_host = v.members.size() >= 2 && static_cast<int>(v.members.size()) == v.n_ranks;
        for (const auto& [rank, member] : v.members)
          one_host = one_host && g.states[static_cast<size_t>(member.first)].hostname == g.states[static_cast<size_t>(p)].hostname;
        if (!one_host) continue;
        host_comm = true;
        for (const auto& [rank, member] : v.members) {
          if (member.first == p) continue;
          if (member.second->ops_started > mine.ops_started) on_its_own = true;
          if (!never.count(member.first) || member.second->ops_started != mine.ops_started) level = false;
        }
      }
      level = level && host_comm;
    }
    if (on_its_own) {
      if (!alone.empty()) return "";
      alone = comm;
    } else if (!level) {
      return "";
    }
  }
  return alone;
}

}  // namespace

std::vector<Finding> AnalyzeInflight(const std::vector<InflightState>& input, const InflightOptions& options) {
  WaitGraph g;
  g.states = WithoutYoungOps(input, options);
  BuildWaitGraph(g);
  const std::vector<OwnOp> own = OldestOwnOps(g);
  std::map<std::string, std::set<int>> groups;
  std::set<int> stuck_roots;
  GroupRoots(g, Roots(g), own, &groups, &stuck_roots);
  std::vector<Finding> out;
  std::set<std::string> explained;
  const std::string alone = groups.size() > 1 ? GroupThatStoppedAlone(g, groups) : "";
  std::vector<int> behind, their_victims;  // the groups stopped behind it, and who waits on them
  for (const auto& [comm, group] : groups) {
    explained.insert(comm);
    for (int r : group)
      for (const InflightComm& c : g.states[r].comms) explained.insert(c.id);
    Finding f = NeverJoinedFinding(g, comm, group);
    if (!alone.empty() && comm != alone) {
      behind.insert(behind.end(), f.ranks.begin(), f.ranks.end());
      their_victims.insert(their_victims.end(), f.victims.begin(), f.victims.end());
      continue;
    }
    out.push_back(std::move(f));
  }
  if (!alone.empty()) {
    Finding& f = out.back();  // the only one so far
    SortUnique(&behind);
    f.victims.insert(f.victims.end(), behind.begin(), behind.end());
    f.victims.insert(f.victims.end(), their_victims.begin(), their_victims.end());
    SortUnique(&f.victims);
    std::vector<int> victims;
    std::set_difference(f.victims.begin(), f.victims.end(), f.ranks.begin(), f.ranks.end(),
                        std::back_inserter(victims));
    f.victims = std::move(victims);
    f.AddText("stopped_behind_it", RankList(behind));
    f.summary += " Ranks " + RankList(behind) + " never joined other collectives either, but each stopped level "
                 "with every rank of its host it shares a communicator with (waiting on a shared input), while " +
                 RankList(f.ranks) + " stopped where a host mate moved on: they are blocked behind it.";
  }
  AddMissingStateFindings(g, &explained, &out);
  const std::vector<Stuck> stuck = StuckTransfers(g, stuck_roots, own, explained);
  if (!stuck.empty()) out.push_back(StuckTransferFinding(g, stuck));
  FoldGroupsThatNeverJoined(out);
  return out;
}

}  // namespace collscope::diagnose
