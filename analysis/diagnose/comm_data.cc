#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <tuple>

#include "analysis/diagnose/comm_data.h"
#include "analysis/diagnose/duck.h"

namespace collscope::diagnose {

uint64_t KernelKey(const CommData& d, const Inst& x) {
  const Comm& c = d.comms[static_cast<size_t>(x.comm)];
  return (static_cast<uint64_t>(x.op) << 56) ^ (static_cast<uint64_t>(c.n_ranks) << 40) ^
         (static_cast<uint64_t>(c.nnodes) << 28) ^
         static_cast<uint64_t>(x.bytes) * 0x9E3779B97F4A7C15ULL;
}

namespace {

// When a Send and a Recv can have completed: at start + exec where the record has its start, else
// between its dump pass's predecessor and its own dump (RecordEndSql's dump time).
struct Completion {
  int64_t lo = 0, hi = 0;
};
Completion CompletionOf(const P2p& x) {
  if (x.earliest_ts >= x.ts) {
    const int64_t t = x.ts + static_cast<int64_t>(x.exec);
    return {t, t};
  }
  return {x.earliest_ts, x.ts};
}

// Hosts' clocks agree to within this (NTP on a cluster's network); two sides of one transfer,
// which complete together, are never seen further apart.
constexpr int64_t kClockAgreementUs = 10'000;

// Pairs of one channel (Sends of one size from one process to another, and the Recvs at the other
// end), each side in its own order, whose numbers do not pair them: made to pair by position.
// A side may have lost transfers at either end: a window's edge, cut on each side by its own
// clock or dump time, or a ring buffer's drop. A Recv index j = i + offset pairs the i-th Send.
//  1. Time first: a Send and its Recv complete together, so a pairing whose sides cannot have
//     completed within the hosts' clock agreement is wrong. Of the offsets within 4, the one with
//     the fewest such impossible pairs is taken, where it has fewer than the unshifted one.
//  2. Where time cannot tell (every pairing possible: dump times coarser than the transfers), the
//     waits decide, for the longer side's head only: the side that posted last waits for nobody,
//     so in a right pair one time is the wire's, and a pair shifted by one transfer joins two
//     waits. A side as long as the other lost nothing, or as much at both ends, and is paired as it
//     is: a genuine outage makes both sides of a transfer long, and a shift must not pair it away.
//     Of the alignments that skip up to 4 of the longer side's first transfers, the one with the
//     least total wire time (the shorter side of each pair) over the same pairs is taken; the
//     unshifted one unless another is clearly less.
void AlignByPosition(std::vector<const P2p*>* sends, std::vector<const P2p*>* recvs) {
  const std::vector<const P2p*>& sv = *sends;
  const std::vector<const P2p*>& rv = *recvs;
  const long ns = static_cast<long>(sv.size()), nr = static_cast<long>(rv.size());
  constexpr long kMaxShift = 4;
  auto impossible = [&](long offset) {
    long n = 0;
    for (long i = std::max(0L, -offset); i < ns && i + offset < nr; ++i) {
      const Completion a = CompletionOf(*sv[static_cast<size_t>(i)]);
      const Completion b = CompletionOf(*rv[static_cast<size_t>(i + offset)]);
      if (std::max(a.lo, b.lo) - std::min(a.hi, b.hi) > kClockAgreementUs) ++n;
    }
    return n;
  };
  long best = 0;
  long fewest = impossible(0);
  for (long shift = 1; shift <= kMaxShift && fewest > 0; ++shift)  // the nearest first
    for (long offset : {shift, -shift}) {
      const long n = impossible(offset);
      if (n < fewest) fewest = n, best = offset;
    }
  if (best == 0) {
    const long span = std::min(ns, nr) - kMaxShift;
    if (span < 8) return;
    auto wire = [&](long offset) {
      double sum = 0;
      for (long i = kMaxShift; i < kMaxShift + span; ++i) {
        const long j = i + offset;
        if (j < 0 || j >= nr || i >= ns) return -1.0;
        sum += std::min(sv[static_cast<size_t>(i)]->exec, rv[static_cast<size_t>(j)]->exec);
      }
      return sum;
    };
    double least = wire(0);
    for (long shift = 1; shift <= std::min(kMaxShift, std::labs(nr - ns)); ++shift) {
      const long offset = nr > ns ? shift : -shift;
      const double w = wire(offset);
      if (w >= 0 && least >= 0 && w < 0.8 * least) least = w, best = offset;
    }
  }
  if (best > 0) recvs->erase(recvs->begin(), recvs->begin() + best);
  if (best < 0) sends->erase(sends->begin(), sends->begin() - best);
}

}  // namespace

namespace {

std::vector<P2pTransfer> PairCrossHostTransfers(const CommData& d) {
  std::map<std::tuple<int, int, int, int64_t>, std::vector<const P2p*>> sends,
      recvs;  // (comm, from, to, bytes)
  size_t cross_sends = 0;
  for (const P2p& x : d.p2p) {
    if (x.peer < 0) continue;
    const int from = x.send ? x.proc : x.peer, to = x.send ? x.peer : x.proc;
    if (d.procs[static_cast<size_t>(from)].host == d.procs[static_cast<size_t>(to)].host) continue;
    (x.send ? sends : recvs)[{x.comm, from, to, x.bytes}].push_back(&x);
    cross_sends += x.send;
  }
  // At most one transfer a Send: reserved, since a 256-GPU expert-parallel job has hundreds of
  // thousands, and growing the vector by doubling took most of this function's time (perf, on the
  // small suite's 256-GPU mismatch job).
  std::vector<P2pTransfer> out;
  out.reserve(cross_sends);
  auto by_sn = [](const P2p* a, const P2p* b) {
    return std::tie(a->sn, a->ts) < std::tie(b->sn, b->ts);
  };
  for (auto& [k, sv] : sends) {
    auto it = recvs.find(k);
    if (it == recvs.end()) continue;
    auto& rv = it->second;
    std::sort(sv.begin(), sv.end(), by_sn);
    std::sort(rv.begin(), rv.end(), by_sn);
    // Where the sender's and the receiver's sequence numbers name the same transfers, a Send pairs
    // with the Recv of its number, so a side missing (dropped by the writer's ring buffer, or cut
    // by a window's edge) leaves its partner out instead of shifting every later pair; otherwise
    // the sides pair by position. Whether the numbers agree is judged where both sides' numbers
    // overlap: a window's edges, which fall on each process's own dump times, can cut a second
    // more of one side than of the other at each end.
    const int64_t lo = std::max(sv.front()->sn, rv.front()->sn),
                  hi = std::min(sv.back()->sn, rv.back()->sn);
    auto within = [&](const std::vector<const P2p*>& side) {
      return std::count_if(side.begin(), side.end(),
                           [&](const P2p* x) { return x->sn >= lo && x->sn <= hi; });
    };
    std::vector<const P2p*> ms, mr;  // the pairs of equal numbers
    for (size_t i = 0, j = 0; i < sv.size() && j < rv.size();) {
      if (sv[i]->sn < rv[j]->sn)
        ++i;
      else if (rv[j]->sn < sv[i]->sn)
        ++j;
      else
        ms.push_back(sv[i++]), mr.push_back(rv[j++]);
    }
    const size_t overlap = static_cast<size_t>(std::min(within(sv), within(rv)));
    if (sv.front()->sn >= 0 && !ms.empty() && 10 * ms.size() >= 9 * overlap) {
      sv = std::move(ms);
      rv = std::move(mr);
    } else {
      AlignByPosition(&sv, &rv);
    }
    for (size_t i = 0; i < std::min(sv.size(), rv.size()); ++i) {
      P2pTransfer t;
      t.comm = std::get<0>(k);
      t.from = std::get<1>(k);
      t.to = std::get<2>(k);
      t.bytes = std::get<3>(k);
      t.order = static_cast<int64_t>(i);
      t.send = sv[i]->exec;
      t.recv = rv[i]->exec;
      t.ts = std::min(sv[i]->ts, rv[i]->ts);
      t.earliest = std::min(t.ts, std::max(sv[i]->earliest_ts, rv[i]->earliest_ts));
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace

const std::vector<P2pTransfer>& CrossHostP2pTransfers(const CommData& d) {
  auto& memo = d.cross_host_transfers;
  if (!memo || memo->p2p != d.p2p.data() || memo->n != d.p2p.size())
    memo = std::make_shared<const CommData::TransfersMemo>(
        CommData::TransfersMemo{d.p2p.data(), d.p2p.size(), PairCrossHostTransfers(d)});
  return memo->transfers;
}

std::vector<bool> AllToAllComms(const CommData& d) {
  std::set<std::tuple<int, int, int>> sends;
  for (const P2p& x : d.p2p)
    if (x.send && x.peer >= 0 && x.peer != x.proc) sends.insert({x.comm, x.proc, x.peer});
  std::vector<size_t> pairs(d.comms.size(), 0);
  for (const auto& t : sends) pairs[static_cast<size_t>(std::get<0>(t))]++;
  std::vector<bool> out(d.comms.size(), false);
  for (size_t c = 0; c < d.comms.size(); ++c) {
    const size_t m = d.comms[c].procs.size();
    out[c] = m >= 3 && pairs[c] == m * (m - 1);
  }
  return out;
}

std::vector<double> UsualWireOfSiblings(const CommData& d, const std::vector<P2pTransfer>& pairs) {
  // Transfers of one size compare as they are. Where a size repeats too rarely to have a usual time
  // of its own (an expert all-to-all's messages follow the tokens routed, a different size for
  // nearly every pair and call, so each was its own only sibling and never slow), the usual time
  // is the size at the usual rate of its siblings within a factor of two of it.
  constexpr size_t kOwnSiblings = 8;
  using Key = std::tuple<std::string, int, int64_t>;  // (comm name, comm size, bytes or -1 - class)
  auto key = [&](const P2pTransfer& t, bool by_class) {
    const Comm& c = d.comms[static_cast<size_t>(t.comm)];
    return Key{c.name, c.n_ranks, by_class ? -1 - std::bit_width(static_cast<uint64_t>(std::max<int64_t>(t.bytes, 1))) : t.bytes};
  };
  auto lower_quartile = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[(v.size() - 1) / 4];
  };
  std::map<Key, std::vector<double>> same_size, per_byte;
  for (const P2pTransfer& t : pairs) {
    same_size[key(t, false)].push_back(t.Wire());
    per_byte[key(t, true)].push_back(t.Wire() / static_cast<double>(std::max<int64_t>(t.bytes, 1)));
  }
  std::map<Key, double> usual;
  for (auto& [k, v] : same_size)
    if (v.size() >= kOwnSiblings) usual[k] = lower_quartile(v);
  for (auto& [k, v] : per_byte) usual[k] = lower_quartile(v);
  std::vector<double> out;
  out.reserve(pairs.size());
  for (const P2pTransfer& t : pairs) {
    auto it = usual.find(key(t, false));
    out.push_back(it != usual.end() ? it->second
                                    : usual[key(t, true)] * static_cast<double>(std::max<int64_t>(t.bytes, 1)));
  }
  return out;
}

namespace {

// A communicator's members as an arithmetic progression of global ranks, when they are one.
struct Progression {
  int first = 0, stride = 0, n = 0;
};
bool AsProgression(const CommData& d, const Comm& c, Progression* p) {
  std::vector<int> r;
  for (int q : c.procs) r.push_back(d.procs[static_cast<size_t>(q)].global_rank);
  std::sort(r.begin(), r.end());
  if (r.size() < 2 || r[0] < 0) return false;
  p->first = r[0];
  p->stride = r[1] - r[0];
  p->n = static_cast<int>(r.size());
  for (size_t i = 2; i < r.size(); ++i)
    if (r[i] - r[i - 1] != p->stride) return false;
  return p->stride > 0;
}

// The largest group size whose groups cover every rank.
int Tiling(const std::map<int, std::set<int>>& covered, size_t world) {
  int best = 0;
  for (const auto& [n, ranks] : covered)
    if (ranks.size() == world) best = std::max(best, n);
  return best;
}

// Sets Inst::members_logging: an instance of (communicator, op) whose sequence number lies in
// every member's range of sequence numbers of that op (per op: NCCL numbers each collective type
// on its own), in a communicator whose every rank wrote records. A member's range reaches one of
// its sampling steps (its mean step between records) beyond its first and last record: a 2.29
// snapshot log samples one collective a dump, and its member was logging the collectives between
// its first dump and the one before, which a complete log's step of one does not widen.
Status MarkMembersLogging(duckdb_connection conn, const std::string& run_filter,
                          const std::map<int64_t, int>& comm_index, CommData* d) {
  auto r = Fetch(conn,
                 "SELECT CAST(comm_id AS BIGINT), CAST(enum_code(op) AS BIGINT), CAST(count(*) AS BIGINT), "
                 "CAST(max(lo - step) AS BIGINT), CAST(min(hi + step) AS BIGINT) FROM ("
                 "SELECT o.comm_id, o.op, r.process_id, min(r.sn) AS lo, max(r.sn) AS hi, "
                 "CASE WHEN count(*) > 1 THEN (max(r.sn) - min(r.sn)) // (count(*) - 1) ELSE 0 END AS step "
                 "FROM records r JOIN operations o USING (run_id, op_id) WHERE r.run_id = " +
                     run_filter + " AND o.kind = 'coll' GROUP BY ALL) GROUP BY ALL",
                 "iiiii");
  if (!r.ok()) return r.status();
  std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> logging;  // (comm, op) -> sn range
  for (size_t i = 0; i < r->rows; ++i) {
    auto ci = comm_index.find(r->i[0][i]);
    if (ci == comm_index.end()) continue;
    const Comm& c = d->comms[static_cast<size_t>(ci->second)];
    const size_t members = std::max(c.procs.size(), static_cast<size_t>(std::max(0, c.n_ranks)));
    const bool all = static_cast<size_t>(r->i[2][i]) >= members;
    logging[{ci->second, static_cast<int>(r->i[1][i])}] = all ? std::make_pair(r->i[3][i], r->i[4][i])
                                                                : std::make_pair(INT64_MAX, INT64_MIN);
  }
  for (Inst& x : d->insts) {
    auto it = logging.find({x.comm, x.op});
    x.members_logging = it != logging.end() && x.sn >= it->second.first && x.sn <= it->second.second;
  }
  return Status::Ok();
}

// Inst::host_late, for the communicators with a host of several members among members
// of several hosts. A host whose slowest member was faster than every other host's fastest
// arrived after all of them (ties are not).
Status MarkLateHosts(duckdb_connection conn, const std::string& run_filter,
                     const std::string& record_filter, const std::map<int64_t, int>& comm_index,
                     CommData* d) {
  std::string comm_ids;
  for (const auto& [id, c] : comm_index) {
    std::map<int, int> members;  // host -> members
    for (int p : d->comms[static_cast<size_t>(c)].procs)
      members[d->procs[static_cast<size_t>(p)].host]++;
    bool several = false;
    for (const auto& [h, m] : members) several = several || m > 1;
    if (members.size() > 1 && several)
      comm_ids += (comm_ids.empty() ? "" : ",") + std::to_string(id);
  }
  if (comm_ids.empty()) return Status::Ok();
  auto r = Fetch(
      conn,
      "SELECT CAST(comm_id AS BIGINT), CAST(enum_code(op) AS BIGINT), CAST(sn AS BIGINT), "
      "CAST(msg_size_bytes AS BIGINT) FROM ("
      "SELECT o.comm_id, o.op, r.sn, o.msg_size_bytes, p.hostname, min(r.exec_time_us) AS hmin, "
      "max(r.exec_time_us) AS hmax, count(*) AS m "
      "FROM records r JOIN operations o USING (run_id, op_id) "
      "JOIN processes p ON p.run_id = r.run_id AND p.process_id = r.process_id "
      "WHERE r.run_id = " +
          run_filter + " AND o.kind = 'coll' AND o.comm_id IN (" + comm_ids + ")" + record_filter +
          " GROUP BY ALL) GROUP BY comm_id, op, sn, msg_size_bytes "
          "HAVING count(*) > 1 AND arg_min(m, hmin) > 1 AND arg_min(hmax, hmin) < "
          "list_sort(list(hmin))[2]",
      "iiii");
  if (!r.ok()) return r.status();
  std::set<std::tuple<int, int, int64_t, int64_t>> late;  // (comm, op, sn, bytes)
  for (size_t i = 0; i < r->rows; ++i) {
    auto ci = comm_index.find(r->i[0][i]);
    if (ci != comm_index.end())
      late.insert({ci->second, static_cast<int>(r->i[1][i]), r->i[2][i], r->i[3][i]});
  }
  if (late.empty()) return Status::Ok();
  for (Inst& x : d->insts) x.host_late = late.count({x.comm, x.op, x.sn, x.bytes}) > 0;
  return Status::Ok();
}

}  // namespace

void InferLayout(CommData* d) {
  if (d->rank_source == "ordinal") return;  // ranks guessed from file order say nothing of it
  const size_t world = d->procs.size();
  std::set<int> with_p2p;
  for (const P2p& x : d->p2p) with_p2p.insert(x.comm);
  std::map<int, std::set<int>> tp_cover, pp_cover;
  for (size_t c = 0; c < d->comms.size(); ++c) {
    Progression p;
    if (!AsProgression(*d, d->comms[c], &p) || static_cast<size_t>(p.n) >= world) continue;
    if (p.stride == 1 && p.first % p.n == 0)
      for (int i = 0; i < p.n; ++i) tp_cover[p.n].insert(p.first + i);
    if (with_p2p.count(static_cast<int>(c)) && static_cast<size_t>(p.stride * p.n) == world)
      for (int i = 0; i < p.n; ++i) pp_cover[p.n].insert(p.first + i * p.stride);
  }
  d->tp = Tiling(tp_cover, world);
  d->pp = Tiling(pp_cover, world);
  if (d->pp > 0) return;
  // No pipeline traffic recorded (2.29): the data-parallel groups, every rank of a block at one
  // tensor-parallel position, tile the world in blocks of one stage each (pipelines outermost,
  // as Megatron orders them).
  const int tp = std::max(d->tp, 1);
  std::map<int, std::set<int>> dp_cover;
  for (const Comm& c : d->comms) {
    Progression p;
    if (!AsProgression(*d, c, &p) || p.stride != tp) continue;
    const int block = p.n * tp;
    if (p.first / block != (p.first + (p.n - 1) * tp) / block) continue;
    for (int i = 0; i < p.n; ++i) dp_cover[p.n].insert(p.first + i * tp);
  }
  const int dp = Tiling(dp_cover, world);
  if (dp > 0 && world % static_cast<size_t>(dp * tp) == 0)
    d->pp = static_cast<int>(world) / (dp * tp);
}

std::string CommLabel(const CommData& d, int comm) {
  const Comm& c = d.comms[static_cast<size_t>(comm)];
  if (!c.name.empty() && c.name != "unknown") return c.name;
  Progression p;
  if (AsProgression(d, c, &p) && (d.tp > 1 || d.pp > 1)) {
    // Without pipelines found, the world is one stage.
    const int world = static_cast<int>(d.procs.size());
    const int stage_size = d.pp > 1 ? world / d.pp : world;
    const int stage = p.first / stage_size, last = p.first + (p.n - 1) * p.stride;
    const bool one_stage = stage == last / stage_size;
    const std::string of_stage =
        d.pp > 1 && one_stage ? " of PP stage " + std::to_string(stage) : "";
    const int tp = std::max(d.tp, 1);
    if (d.tp > 1 && p.stride == 1 && p.n == d.tp)
      return "TP group " + std::to_string((p.first % stage_size) / tp) + of_stage;
    if (d.pp > 1 && p.n == d.pp && p.stride == stage_size)
      return "PP group " + std::to_string(p.first);
    // Every rank of a stage at one tensor-parallel position: its data-parallel group.
    if (one_stage && p.stride == tp && p.n * tp == stage_size)
      return "DP group " + std::to_string(p.first % stage_size) + of_stage;
    if (one_stage && !of_stage.empty()) return std::to_string(p.n) + "-rank group" + of_stage;
  }
  if (d.rank_source != "ordinal") {
    std::vector<int> ranks;
    for (int q : c.procs) ranks.push_back(d.procs[static_cast<size_t>(q)].global_rank);
    std::sort(ranks.begin(), ranks.end());
    return "the group of ranks " + RankList(ranks, 6);
  }
  return "communicator " + c.id;
}

std::string CommIdAndLabel(const CommData& d, int comm) {
  const std::string& id = d.comms[static_cast<size_t>(comm)].id;
  const std::string label = CommLabel(d, comm);
  return label == "communicator " + id ? id : id + " (" + label + ")";
}

std::vector<std::vector<int>> SameWorkGroups(const CommData& d) {
  int world = 0;
  for (const Proc& p : d.procs) world += p.global_rank >= 0;
  // Only communicators that run collectives: a pipeline communicator (Send/Recv between stages)
  // spans stages.
  std::vector<bool> collective(d.comms.size(), false);
  for (const Inst& x : d.insts) collective[static_cast<size_t>(x.comm)] = true;
  std::set<std::vector<int>> groups;
  for (size_t i = 0; i < d.comms.size(); ++i) {
    const Comm& c = d.comms[i];
    if (!collective[i] || c.n_ranks < 3 || c.n_ranks >= world) continue;
    std::vector<int> g;
    for (int p : c.procs)
      if (d.procs[static_cast<size_t>(p)].global_rank >= 0) g.push_back(d.procs[static_cast<size_t>(p)].global_rank);
    std::sort(g.begin(), g.end());
    if (g.size() >= 3) groups.insert(std::move(g));
  }
  return {groups.begin(), groups.end()};
}

bool Complete(const CommData& d, const Inst& x) {
  const int m = static_cast<int>(d.comms[static_cast<size_t>(x.comm)].procs.size());
  return x.n >= 2 && x.pmin >= 0 && x.members_logging && (x.n == m || (m >= 3 && x.n == m - 1));
}

std::string RecordStartSql(const std::string& r) {
  // (greatest: no unsigned underflow on a hostile exec time.)
  return "coalesce(" + r + ".start_ts_us, " + r + ".kernel_start_ts_us, greatest(" + r +
         ".dump_ts_us, " + r + ".exec_time_us) - " + r + ".exec_time_us)";
}

std::string RecordEndSql(const std::string& r) {
  return "coalesce(" + r + ".stop_ts_us, " + r + ".kernel_stop_ts_us, " + r + ".start_ts_us + " +
         r + ".exec_time_us, " + r + ".kernel_start_ts_us + " + r + ".exec_time_us, " + r +
         ".dump_ts_us)";
}

namespace {

// The SQL conditions that keep the records of `window` (all of them when it is the whole run).
struct WindowSql {
  std::string records, instances, p2p, proxy;
};

// LoadCommData's steps, each filling its part of `d`: they share the store's connection, the run,
// and the store's ids of processes and communicators as CommData's indexes.
struct Loader {
  // Processes, in (hostname, pid) order; each host an index.
  Status LoadProcesses();
  // Communicators and their members (with the plugin's global ranks when present).
  Status LoadCommunicators();
  // Collective instances, one per (communicator, op, sequence number, size): `exact` counts the
  // records with their own start times.
  Status LoadInstances(const WindowSql& w, int64_t* exact);
  // Point-to-point records (pipeline sends and receives), peers mapped to processes.
  Status LoadP2p(const WindowSql& w);
  // Network sends' time on the wire (proxy_trace steps), one per proxy op, peers mapped to
  // processes through the communicator's rank order as for point-to-point records.
  Status LoadProxySends(const WindowSql& w);

  duckdb_connection conn;
  std::string run_filter;  // the run_id
  std::map<int64_t, int> proc_index, comm_index;
  CommData d;
};

Status Loader::LoadProcesses() {
  auto pr = Fetch(conn,
                  "SELECT CAST(process_id AS BIGINT), hostname, CAST(pid AS BIGINT) FROM processes "
                  "WHERE run_id = " +
                      run_filter + " ORDER BY hostname, pid",
                  "isi");
  if (!pr.ok()) return pr.status();
  std::map<std::string, int> host_index;
  for (size_t i = 0; i < pr->rows; ++i) {
    const std::string& h = pr->s[0][i];
    auto [it, added] = host_index.emplace(h, static_cast<int>(d.hosts.size()));
    if (added) d.hosts.push_back(h);
    proc_index[pr->i[0][i]] = static_cast<int>(d.procs.size());
    Proc p;
    p.host = it->second;
    p.global_rank = static_cast<int>(d.procs.size());  // ordinal fallback
    p.process_id = pr->i[0][i];
    p.pid = pr->null_i[1][i] ? -1 : pr->i[1][i];
    d.procs.push_back(p);
  }
  d.rank_source = "ordinal";
  return Status::Ok();
}

Status Loader::LoadCommunicators() {
  auto cr = Fetch(conn,
                  "SELECT CAST(c.comm_id AS BIGINT), c.id, coalesce(c.comm_name, ''), "
                  "CAST(c.n_ranks AS BIGINT), CAST(c.nnodes AS BIGINT) FROM communicators c "
                  // By the communicator's own id, not the ingest's numbering (which follows the
                  // order parallel readers met them): every run of a diagnosis sees one order.
                  "WHERE c.run_id = " +
                      run_filter + " ORDER BY c.id, c.comm_id",
                  "issii");
  if (!cr.ok()) return cr.status();
  for (size_t i = 0; i < cr->rows; ++i) {
    comm_index[cr->i[0][i]] = static_cast<int>(d.comms.size());
    Comm c;
    c.id = cr->s[0][i];
    c.name = cr->s[1][i];
    c.n_ranks = static_cast<int>(cr->i[1][i]);
    c.nnodes = static_cast<int>(cr->i[2][i]);
    d.comms.push_back(std::move(c));
  }
  auto mr = Fetch(conn,
                  "SELECT CAST(o.comm_id AS BIGINT), CAST(r.process_id AS BIGINT), "
                  "CAST(min(r.rank) AS BIGINT), CAST(max(r.global_rank) AS BIGINT) "
                  "FROM records r JOIN operations o USING (run_id, op_id) WHERE r.run_id = " +
                      run_filter + " GROUP BY ALL ORDER BY 1, 3",
                  "iiii");
  if (!mr.ok()) return mr.status();
  bool have_global = false;
  std::vector<int> plugin_rank(d.procs.size(), -1);
  std::vector<std::vector<int>> comm_ranks(d.comms.size());  // parallel to each Comm::procs
  for (size_t i = 0; i < mr->rows; ++i) {
    auto ci = comm_index.find(mr->i[0][i]);
    auto pi = proc_index.find(mr->i[1][i]);
    if (ci == comm_index.end() || pi == proc_index.end()) continue;
    d.comms[ci->second].procs.push_back(pi->second);
    comm_ranks[ci->second].push_back(static_cast<int>(mr->i[2][i]));
    if (!mr->null_i[3][i]) {
      plugin_rank[pi->second] = static_cast<int>(mr->i[3][i]);
      have_global = true;
    }
  }
  for (size_t ci = 0; ci < d.comms.size(); ++ci) {
    Comm& c = d.comms[ci];
    for (int p : c.procs) c.hosts.push_back(d.procs[p].host);
    SortUnique(&c.hosts);
    c.ranks = comm_ranks[ci];
  }
  if (have_global) {
    for (size_t p = 0; p < d.procs.size(); ++p)
      if (plugin_rank[p] >= 0) d.procs[p].global_rank = plugin_rank[p];
    d.rank_source = "collscope";
  } else {
    // The communicator that spans every process: its ranks are the global ranks. Where some
    // logs are lost it spans every process that wrote one, and has more ranks than they: the
    // largest such communicator, whose ranks are still the global ranks (numbering the processes
    // in order instead would shift every rank after a lost log).
    int world = -1;
    for (size_t ci = 0; ci < d.comms.size(); ++ci) {
      const Comm& c = d.comms[ci];
      if (c.procs.size() != d.procs.size() || c.n_ranks < static_cast<int>(d.procs.size())) continue;
      std::vector<int> seen(d.procs.size(), 0);
      std::set<int> ranks;
      bool ok = true;
      for (size_t k = 0; k < c.procs.size() && ok; ++k) {
        const int r = comm_ranks[ci][k];
        ok = !seen[static_cast<size_t>(c.procs[k])]++ && r >= 0 && r < c.n_ranks && ranks.insert(r).second;
      }
      if (ok && (world < 0 || c.n_ranks > d.comms[static_cast<size_t>(world)].n_ranks)) world = static_cast<int>(ci);
    }
    if (world >= 0) {
      const Comm& c = d.comms[static_cast<size_t>(world)];
      for (size_t k = 0; k < c.procs.size(); ++k)
        d.procs[static_cast<size_t>(c.procs[k])].global_rank = comm_ranks[static_cast<size_t>(world)][k];
      d.rank_source = "world-communicator";
    }
  }
  return Status::Ok();
}

// The window: a record is dumped after it completes, so records dumped before the window's start
// (less a margin for members that started earlier than their peers) cannot belong to an instance
// inside it; the instance test itself is on the members' start and completion times.
WindowSql WindowFilters(const TimeWindow& window) {
  WindowSql w;
  if (!window.all()) {
    constexpr int64_t kStraddleMarginUs = 60'000'000;
    const std::string since = std::to_string(window.since_us),
                      until = std::to_string(window.until_us);
    const std::string start = RecordStartSql("r"), end = RecordEndSql("r");
    w.records = " AND r.dump_ts_us >= " + std::to_string(std::max<int64_t>(0, window.since_us - kStraddleMarginUs));
    w.instances = " HAVING min(" + start + ") >= " + since + " AND max(" + end + ") <= " + until;
    // A Send and its Recv end together but start apart (the one posted first waits), so a pair
    // is kept or dropped whole by its end: a lone side at the window's edge would look like a
    // transfer that took as long as its wait.
    w.p2p = " AND " + end + " >= " + since + " AND " + end + " <= " + until;
    // Proxy ops by their completion.
    w.proxy = " HAVING t >= " + since + " AND t <= " + until;
  }
  return w;
}

Status Loader::LoadInstances(const WindowSql& w, int64_t* exact_out) {
  int64_t exact = 0;
  auto ir = Fetch(
      conn,
      "SELECT CAST(o.comm_id AS BIGINT), CAST(enum_code(o.op) AS BIGINT), "
      "CAST(r.sn AS BIGINT), CAST(o.msg_size_bytes AS BIGINT), CAST(count(*) AS BIGINT), "
      "CAST(min(r.exec_time_us) AS DOUBLE), CAST(median(CAST(r.exec_time_us AS DOUBLE)) AS "
      "DOUBLE), "
      "CAST(max(r.exec_time_us) AS DOUBLE), "
      // Ties of the shortest time (whole microseconds) go to a member drawn by a hash of
      // (communicator rank, sequence number): neither a parallel aggregation's order
      // nor the ingest's numbering may decide it, and no rank may win every tie.
      "CAST(arg_min(r.process_id, CAST(r.exec_time_us AS HUGEINT) * 4294967296 + "
      "hash(r.rank, r.sn) % 4294967296) AS BIGINT), "
      "CAST(min(coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us)) AS BIGINT), "
      "CAST(count(r.start_ts_us) + count(r.kernel_start_ts_us) AS BIGINT), "
      "CAST(max(coalesce(r.start_ts_us, r.kernel_start_ts_us, po.prev, 0)) AS BIGINT), "
      // The member last but one, by the same order.
      "CAST(coalesce((arg_min(r.process_id, CAST(r.exec_time_us AS HUGEINT) * 4294967296 + "
      "hash(r.rank, r.sn) % 4294967296, 2))[2], -1) AS BIGINT), "
      "CAST(coalesce((min(r.exec_time_us, 2))[2], 0) AS DOUBLE) "
      "FROM records r JOIN operations o USING (run_id, op_id) "
      "LEFT JOIN collscope_pass_of po ON po.process_id = r.process_id AND po.t = r.dump_ts_us "
      "WHERE r.run_id = " +
          run_filter + " AND o.kind = 'coll'" + w.records +
          " GROUP BY o.comm_id, o.op, r.sn, o.msg_size_bytes" + w.instances + " ORDER BY 10",
      "iiiiidddiiiiid");
  if (!ir.ok()) return ir.status();
  d.insts.reserve(ir->rows);
  d.t0 = INT64_MAX;
  d.t1 = INT64_MIN;
  for (size_t i = 0; i < ir->rows; ++i) {
    auto ci = comm_index.find(ir->i[0][i]);
    auto pi = proc_index.find(ir->i[5][i]);
    if (ci == comm_index.end()) continue;
    Inst x;
    x.comm = ci->second;
    x.op = static_cast<int>(ir->i[1][i]);
    x.sn = ir->i[2][i];
    x.bytes = ir->i[3][i];
    x.n = static_cast<int>(ir->i[4][i]);
    x.tmin = ir->d[0][i];
    x.tmed = ir->d[1][i];
    x.tmax = ir->d[2][i];
    x.pmin = pi == proc_index.end() ? -1 : pi->second;
    auto p2 = proc_index.find(ir->i[9][i]);
    x.p2 = p2 == proc_index.end() ? -1 : p2->second;
    x.t2 = ir->d[3][i];
    x.ts = ir->i[6][i];
    x.earliest_ts = std::min(x.ts, ir->i[8][i]);
    exact += ir->i[7][i];
    d.t0 = std::min(d.t0, x.ts);
    d.t1 = std::max(d.t1, x.ts + static_cast<int64_t>(x.tmax));
    d.insts.push_back(x);
  }
  *exact_out = exact;
  return Status::Ok();
}

Status Loader::LoadP2p(const WindowSql& w) {
  auto p2 = Fetch(
      conn,
      "SELECT CAST(o.comm_id AS BIGINT), CAST(r.process_id AS BIGINT), "
      "CAST(coalesce(o.peer, -1) AS BIGINT), CAST(o.op = 'Send' AS BIGINT), "
      "CAST(o.msg_size_bytes AS BIGINT), CAST(r.exec_time_us AS DOUBLE), "
      "CAST(coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us) AS BIGINT), "
      "CAST(coalesce(r.sn, -1) AS BIGINT), "
      "CAST(coalesce(r.start_ts_us, r.kernel_start_ts_us, po.prev, 0) AS BIGINT) "
      "FROM records r JOIN operations o USING (run_id, op_id) "
      "LEFT JOIN collscope_pass_of po ON po.process_id = r.process_id AND po.t = r.dump_ts_us "
      "WHERE r.run_id = " +
          run_filter + " AND o.kind = 'p2p' AND o.op IN ('Send', 'Recv')" + w.p2p,
      "iiiiidiii");
  if (!p2.ok()) return p2.status();
  d.p2p.reserve(p2->rows);
  for (size_t i = 0; i < p2->rows; ++i) {
    auto ci = comm_index.find(p2->i[0][i]);
    auto pi = proc_index.find(p2->i[1][i]);
    if (ci == comm_index.end() || pi == proc_index.end()) continue;
    const Comm& c = d.comms[ci->second];
    P2p x;
    x.comm = ci->second;
    x.proc = pi->second;
    const int64_t peer = p2->i[2][i];
    x.peer = (peer >= 0 && c.procs.size() == static_cast<size_t>(c.n_ranks) && peer < c.n_ranks)
                 ? c.procs[static_cast<size_t>(peer)]
                 : -1;
    x.send = p2->i[3][i] != 0;
    x.bytes = p2->i[4][i];
    x.exec = p2->d[0][i];
    x.ts = p2->i[5][i];
    x.sn = p2->i[6][i];
    x.earliest_ts = std::min(x.ts, p2->i[7][i]);
    d.p2p.push_back(x);
  }
  return Status::Ok();
}

Status Loader::LoadProxySends(const WindowSql& w) {
  // A store written before proxy tables existed, opened read-only, has none.
  auto has_proxy = Fetch(conn,
                         "SELECT CAST(count(*) AS BIGINT) FROM duckdb_tables() WHERE database_name = "
                         "current_database() AND table_name = 'proxy_steps'",
                         "i");
  if (!has_proxy.ok()) return has_proxy.status();
  auto px = has_proxy->i[0][0] == 0 ? Result<Columns>(Columns{}) : Fetch(conn,
                  "SELECT CAST(comm_id AS BIGINT), CAST(process_id AS BIGINT), CAST(any_value(peer) AS BIGINT), "
                  "CAST(coalesce(max(stop_ts_us), max(dump_ts_us)) AS BIGINT) AS t, "
                  "CAST(sum(trans_size_bytes) AS DOUBLE), CAST(sum(wire_us) AS DOUBLE) "
                  "FROM proxy_steps WHERE run_id = " + run_filter +
                      " AND direction = 'send' AND peer IS NOT NULL AND wire_us IS NOT NULL "
                      "AND trans_size_bytes IS NOT NULL "
                      "GROUP BY comm_id, process_id, rank, channel_id, peer, proxy_op_sn" + w.proxy,
                  "iiiidd");
  if (!px.ok()) return px.status();
  d.proxy_sends.reserve(px->rows);
  for (size_t i = 0; i < px->rows; ++i) {
    auto ci = comm_index.find(px->i[0][i]);
    auto pi = proc_index.find(px->i[1][i]);
    if (ci == comm_index.end() || pi == proc_index.end()) continue;
    const Comm& c = d.comms[ci->second];
    const int64_t peer = px->i[2][i];
    if (peer < 0 || c.procs.size() != static_cast<size_t>(c.n_ranks) || peer >= c.n_ranks) continue;
    ProxySend x;
    x.comm = ci->second;
    x.from = pi->second;
    x.to = c.procs[static_cast<size_t>(peer)];
    x.ts = px->i[3][i];
    x.bytes = px->d[0][i];
    x.wire_us = px->d[1][i];
    d.proxy_sends.push_back(x);
  }
  std::stable_sort(d.proxy_sends.begin(), d.proxy_sends.end(), [](const ProxySend& a, const ProxySend& b) {
    return std::tie(a.ts, a.comm, a.from, a.to, a.bytes, a.wire_us) <
           std::tie(b.ts, b.comm, b.from, b.to, b.bytes, b.wire_us);
  });
  return Status::Ok();
}

}  // namespace

// When records carry only dump times, a record completed between its process's previous dump
// pass and its own: the passes (runs of line times less than 1 ms apart) give every record the
// start of the previous pass as the earliest time it can have completed. Computed once (a
// temporary table, even on a read-only store) for the collective and point-to-point queries.
Status CreatePassTable(Store& store, const std::string& run_filter) {
  return store.Exec(
      "CREATE OR REPLACE TEMP TABLE collscope_pass_of AS "
      "WITH lines AS (SELECT DISTINCT process_id, dump_ts_us AS t FROM records WHERE run_id = " +
      run_filter +
      " AND dump_ts_us IS NOT NULL), "
      "breaks AS (SELECT process_id, t, CASE WHEN lag(t) OVER w IS NULL OR t - lag(t) OVER w > "
      "1000 "
      "THEN 1 ELSE 0 END AS brk FROM lines WINDOW w AS (PARTITION BY process_id ORDER BY t)), "
      "numbered AS (SELECT process_id, t, sum(brk) OVER (PARTITION BY process_id ORDER BY t) AS "
      "pass "
      "FROM breaks), "
      "starts AS (SELECT process_id, pass, min(t) AS start FROM numbered GROUP BY ALL), "
      "prevs AS (SELECT process_id, pass, start, lag(start) OVER (PARTITION BY process_id ORDER BY "
      "pass) "
      "AS prev FROM starts) "
      "SELECT n.process_id, n.t, p.prev, p.start FROM numbered n JOIN prevs p USING (process_id, pass)");
}

Result<CommData> LoadCommData(Store& store, const std::string& run, const TimeWindow& window) {
  duckdb_connection conn = store.connection();
  std::string run_filter;
  {
    std::string q = run.empty()
                        ? "SELECT CAST(min(run_id) AS BIGINT) FROM runs"
                        : "SELECT CAST(run_id AS BIGINT) FROM runs WHERE name = " + SqlString(run);
    auto r = Fetch(conn, q, "i");
    if (!r.ok()) return r.status();
    if (r->rows == 0 || r->null_i[0][0])
      return Status::NotFound(run.empty() ? "the store holds no run" : "no run named " + run);
    run_filter = std::to_string(r->i[0][0]);
  }
  Loader l;
  l.conn = conn;
  l.run_filter = run_filter;
  if (Status st = l.LoadProcesses(); !st.ok()) return st;
  if (Status st = l.LoadCommunicators(); !st.ok()) return st;
  if (Status st = CreatePassTable(store, run_filter); !st.ok()) return st;
  const WindowSql w = WindowFilters(window);
  int64_t exact = 0;
  if (Status st = l.LoadInstances(w, &exact); !st.ok()) return st;
  if (Status st = MarkMembersLogging(conn, run_filter, l.comm_index, &l.d); !st.ok()) return st;
  if (Status st = MarkLateHosts(conn, run_filter, w.records, l.comm_index, &l.d); !st.ok())
    return st;
  if (Status st = l.LoadP2p(w); !st.ok()) return st;
  if (Status st = l.LoadProxySends(w); !st.ok()) return st;
  CommData& d = l.d;
  // One order for every run of a diagnosis: by time, then by what the instance is (the query's
  // order leaves ties of time to the ingest's numbering).
  std::stable_sort(d.insts.begin(), d.insts.end(), [](const Inst& a, const Inst& b) {
    return std::tie(a.ts, a.comm, a.op, a.sn, a.bytes) <
           std::tie(b.ts, b.comm, b.op, b.sn, b.bytes);
  });
  std::stable_sort(d.p2p.begin(), d.p2p.end(), [](const P2p& a, const P2p& b) {
    return std::tie(a.ts, a.comm, a.proc, a.peer, a.send, a.sn, a.exec) <
           std::tie(b.ts, b.comm, b.proc, b.peer, b.send, b.sn, b.exec);
  });
  if (d.insts.empty()) d.t0 = d.t1 = 0;
  d.timestamps_exact = exact > 0;
  InferLayout(&d);
  return std::move(l.d);
}

}  // namespace collscope::diagnose
