#include "analysis/diagnose/hang.h"

#include <simdjson.h>

#include <algorithm>
#include <map>
#include <set>

namespace collscope::diagnose {

using readers::FrDump;
using readers::FrEntry;

std::vector<Finding> AnalyzeFlightRecorder(const std::vector<FrDump>& dumps) {
  std::vector<Finding> out;
  // Per rank and PG name: last enqueued and last completed collective sequence numbers.
  struct PgState { int64_t enq = -1, done = -1; };
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
  // Each rank's blocking op: its oldest pending (enqueued, not completed) collective.
  struct Block { const FrEntry* e = nullptr; std::vector<int> missing; };
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
    if (pg != pgs.end())
      for (int m : pg->second.ranks) {
        if (m == d.rank || !by_rank.count(m)) continue;
        auto it = st[m].find(oldest->pg_name);
        const int64_t enq = it == st[m].end() ? -1 : it->second.enq;
        if (enq < oldest->collective_seq_id) b.missing.push_back(m);
      }
    block[d.rank] = b;
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
    const FrEntry* e = op_of[key];
    Finding f;
    f.kind = Kind::kHang;
    f.detector = "flight_recorder.wait_graph";
    f.ranks.assign(g.first.begin(), g.first.end());
    f.victims.assign(victims.begin(), victims.end());
    f.comms = {key.first};
    f.confidence = 0.95;
    f.start_us = e->time_created_ns / 1000;
    f.end_us = f.start_us;
    for (const FrDump& d : dumps)
      for (const FrEntry& x : d.entries) f.end_us = std::max(f.end_us, x.time_created_ns / 1000);
    std::set<int> direct;
    for (int r : f.ranks) direct.insert(waiters[r].begin(), waiters[r].end());
    f.Add("collective_seq_id", static_cast<double>(key.second));
    f.AddText("process_group", key.first + " " + e->pg_desc);
    f.AddText("op", e->profiling_name);
    f.AddText("input_sizes", e->input_sizes);
    f.AddText("dtype", e->input_dtypes);
    f.Add("direct_waiters", static_cast<double>(direct.size()));
    for (int r : f.ranks) {
      auto it = st[r].find(key.first);
      if (it != st[r].end()) f.Add("last_enqueued_rank_" + std::to_string(r), static_cast<double>(it->second.enq));
    }
    f.summary = std::string(f.ranks.size() > 1 ? "Ranks " : "Rank ") + RankList(f.ranks) +
                " never joined " + e->profiling_name + " (" + e->input_sizes + " " + e->input_dtypes +
                ") #" + std::to_string(key.second) + " of process group " + key.first + " (" +
                e->pg_desc + "); " + std::to_string(direct.size()) + " peer(s) wait in it and " +
                std::to_string(f.victims.size()) +
                " rank(s) are blocked behind it: inspect what those ranks were doing (stack, GPU "
                "errors in dmesg/XID).";
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<Finding>> DiagnoseFlightRecorder(const std::vector<std::string>& paths) {
  std::vector<FrDump> dumps;
  for (const std::string& p : paths) {
    auto d = readers::ReadFlightRecorderDump(p);
    if (!d.ok()) return d.status();
    dumps.push_back(std::move(*d));
  }
  return AnalyzeFlightRecorder(dumps);
}

Result<std::vector<Finding>> DiagnoseInflight(const std::vector<std::string>& paths) {
  // Per communicator (id): each member's ops_started and the oldest in-flight collective.
  struct Member { int global_rank; std::string host; uint64_t started = 0; int64_t inflight_sn = -1;
                  int n_ch = 0, ch_stopped = 0; std::string op; int64_t ts = 0; };
  std::map<std::string, std::vector<Member>> comms;
  std::map<std::string, int> n_ranks;
  simdjson::dom::parser parser;
  for (const std::string& p : paths) {
    simdjson::dom::element root;
    if (auto err = parser.load(p).get(root)) return Status::Error(p + ": " + simdjson::error_message(err));
    int64_t gr = -1;
    std::string_view host;
    if (root["global_rank"].get_int64().get(gr)) {}
    if (root["hostname"].get_string().get(host)) {}
    int64_t hb = 0;
    if (root["heartbeat_ts_us"].get_int64().get(hb)) {}
    for (const char* key : {"comms", "finalized_comms"}) {
      simdjson::dom::array arr;
      if (root[key].get_array().get(arr)) continue;
      for (auto c : arr) {
        std::string_view id;
        if (c["id"].get_string().get(id)) continue;
        Member m;
        m.global_rank = static_cast<int>(gr);
        m.host = std::string(host);
        uint64_t u = 0;
        if (!c["ops_started"].get_uint64().get(u)) m.started = u;
        int64_t nr = 0;
        if (!c["n_ranks"].get_int64().get(nr)) n_ranks[std::string(id)] = static_cast<int>(nr);
        simdjson::dom::array fl;
        if (!c["inflight"].get_array().get(fl))
          for (auto o : fl) {
            std::string_view kind;
            if (o["kind"].get_string().get(kind) || kind != "coll") continue;
            int64_t sn = -1;
            if (o["sn"].get_int64().get(sn)) {}
            if (m.inflight_sn < 0 || sn < m.inflight_sn) {
              m.inflight_sn = sn;
              std::string_view op;
              if (o["op"].get_string().get(op)) {}
              m.op = std::string(op);
              int64_t v = 0;
              if (!o["n_channels"].get_int64().get(v)) m.n_ch = static_cast<int>(v);
              if (!o["n_channels_stopped"].get_int64().get(v)) m.ch_stopped = static_cast<int>(v);
              if (!o["start_ts_us"].get_int64().get(v)) m.ts = v;
            }
          }
        comms[std::string(id)].push_back(m);
      }
    }
    (void)hb;
  }
  std::vector<Finding> out;
  for (auto& [id, ms] : comms) {
    int64_t sn = -1;
    std::string op;
    int64_t ts = 0;
    for (const Member& m : ms)
      if (m.inflight_sn >= 0 && (sn < 0 || m.inflight_sn < sn)) { sn = m.inflight_sn; op = m.op; ts = m.ts; }
    if (sn < 0) continue;
    Finding f;
    f.kind = Kind::kHang;
    f.detector = "inflight.state";
    f.comms = {id};
    std::set<std::string> hosts;
    std::vector<int> stuck;
    for (const Member& m : ms) {
      const bool joined = m.inflight_sn == sn;
      if (!joined && m.inflight_sn < 0) { f.ranks.push_back(m.global_rank); hosts.insert(m.host); }
      else if (joined && m.n_ch > 0 && m.ch_stopped > 0 && m.ch_stopped < m.n_ch) stuck.push_back(m.global_rank);
      else f.victims.push_back(m.global_rank);
    }
    const int expected = n_ranks.count(id) ? n_ranks[id] : static_cast<int>(ms.size());
    if (f.ranks.empty() && stuck.empty()) {
      if (static_cast<int>(ms.size()) >= expected) continue;  // every member in flight: not localized here
      f.summary = "Communicator " + id + " is stuck in " + op + " #" + std::to_string(sn) + ": " +
                  std::to_string(expected - static_cast<int>(ms.size())) +
                  " member(s) wrote no state file; the missing processes are the likely root cause.";
    } else if (f.ranks.empty()) {
      f.ranks = stuck;
      for (const Member& m : ms)
        if (std::find(stuck.begin(), stuck.end(), m.global_rank) != stuck.end()) hosts.insert(m.host);
      f.summary = "Ranks " + RankList(stuck) + " are stuck mid-transfer in " + op + " #" + std::to_string(sn) +
                  " of communicator " + id + " (some channels finished, others not): check the links of " +
                  *hosts.begin() + ".";
    } else {
      f.summary = std::string(f.ranks.size() > 1 ? "Ranks " : "Rank ") + RankList(f.ranks) + " never joined " + op + " #" +
                  std::to_string(sn) + " of communicator " + id + "; " + std::to_string(f.victims.size()) +
                  " peer(s) wait in it: inspect what those ranks were doing.";
    }
    f.hosts.assign(hosts.begin(), hosts.end());
    SortUnique(&f.ranks);
    SortUnique(&f.victims);
    f.start_us = ts;
    f.end_us = ts;
    f.confidence = 0.9;
    f.Add("sn", static_cast<double>(sn));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace collscope::diagnose
