#include "core/coverage.h"

#include <algorithm>
#include <map>
#include <optional>

namespace collscope {
namespace {

uint64_t U(const std::optional<std::string>& v) { return v ? std::stoull(*v) : 0; }
int64_t I(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }

// The median of `sorted` with one element equal to `own` left out; 1 when nothing is left.
double MedianWithout(const std::vector<double>& sorted, double own) {
  if (sorted.size() < 2) return 1;
  const size_t m = sorted.size() - 1;
  const size_t k = static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), own) - sorted.begin());
  auto at = [&](size_t j) { return j < k ? sorted[j] : sorted[j + 1]; };
  return m % 2 ? at(m / 2) : (at(m / 2 - 1) + at(m / 2)) / 2;
}

std::string InList(const std::vector<std::string>& values) {
  std::string s;
  for (const std::string& v : values) s += (s.empty() ? "" : ", ") + SqlString(v);
  return s;
}

}  // namespace

double MemberCoverage::relative() const {
  if (peer_share <= 0) return 1;
  return std::min(1.0, share() / peer_share);
}

Result<std::vector<MemberCoverage>> MemberCoverageOf(Store& store, const CoverageQuery& q) {
  std::string filter = "r.run_id = " + std::to_string(q.run_id) + " AND o.kind = 'coll'";
  if (!q.comms.empty()) filter += " AND c.id IN (" + InList(q.comms) + ")";
  // The span is the sequence numbers whose instance time lies in the window: the earliest start
  // (or dump) over its members, the time the detectors place an instance at (an Inspector record
  // without timestamps is known only by its dump). Each member's records of those count wherever
  // they were dumped: members dump at their own times, so a window's edges would otherwise cut
  // some members' records of an instance and not others'.
  std::string in_window = "true";
  if (q.since_us > 0 || q.until_us != INT64_MAX)
    in_window = "t BETWEEN " + std::to_string(q.since_us) + " AND " + std::to_string(q.until_us);
  // Sequence numbers count a communicator's collectives of one function alike on every member, so
  // the instances any member recorded are the ones its peers could have recorded too.
  auto rows = store.Query(
      "WITH b AS (SELECT r.process_id, r.rank, o.comm_id, CAST(o.op AS VARCHAR) AS op, r.sn, "
      "coalesce(r.start_ts_us, r.kernel_start_ts_us, r.dump_ts_us) AS t "
      "FROM records r JOIN operations o ON o.run_id = r.run_id AND o.op_id = r.op_id "
      "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id WHERE " + filter + "), "
      "span AS (SELECT comm_id, op, min(sn) AS lo, max(sn) AS hi FROM (SELECT comm_id, op, sn, min(t) AS t "
      "FROM b GROUP BY ALL) WHERE " + in_window + " GROUP BY ALL), "
      "r AS (SELECT b.* FROM b JOIN span s USING (comm_id, op) WHERE b.sn BETWEEN s.lo AND s.hi), "
      "m AS (SELECT process_id, comm_id, op, min(rank) AS rank, count(DISTINCT sn) AS seen "
      "FROM r GROUP BY ALL), "
      "u AS (SELECT comm_id, op, count(DISTINCT sn) AS known FROM r GROUP BY ALL) "
      "SELECT m.process_id, p.hostname, p.pid, c.id, coalesce(c.comm_name, ''), m.rank, m.op, m.seen, "
      "u.known FROM m JOIN u USING (comm_id, op) "
      "JOIN communicators c ON c.run_id = " + std::to_string(q.run_id) + " AND c.comm_id = m.comm_id "
      "JOIN processes p ON p.run_id = c.run_id AND p.process_id = m.process_id "
      "ORDER BY c.id, m.op, m.rank, m.process_id");
  if (!rows.ok()) return rows.status();
  std::vector<MemberCoverage> out;
  for (const auto& row : rows->rows) {
    MemberCoverage m;
    m.process_id = I(row[0]);
    m.hostname = row[1].value_or("");
    m.pid = U(row[2]);
    m.comm = row[3].value_or("");
    m.comm_name = row[4].value_or("");
    m.rank = static_cast<int>(I(row[5]));
    m.op = row[6].value_or("");
    m.seen = U(row[7]);
    m.known = U(row[8]);
    out.push_back(std::move(m));
  }
  // Each member's peers: the other members of its communicator, for the same op. Their median is
  // the sorted shares' median with the member's own value left out (linear in a world
  // communicator's ten thousand members, not quadratic).
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < out.size(); ++i) groups[{out[i].comm, out[i].op}].push_back(i);
  for (const auto& [key, members] : groups) {
    std::vector<double> sorted;
    for (size_t i : members) sorted.push_back(out[i].share());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i : members) out[i].peer_share = MedianWithout(sorted, out[i].share());
  }
  return out;
}

Status CountDrops(Store& store, int32_t run_id, RunCoverage* c) {
  // The counters are running totals: the newest of each (process, communicator, rank) counts.
  auto drops = store.Query(
      "SELECT count(*), sum(coll), sum(p2p), count(*) FILTER (WHERE coll + p2p > 0) FROM ("
      "SELECT arg_max(coll_dropped_total, dump_ts_us) AS coll, arg_max(p2p_dropped_total, dump_ts_us) AS p2p "
      "FROM dump_stats WHERE run_id = " + std::to_string(run_id) + " GROUP BY process_id, comm_id, rank)");
  if (!drops.ok()) return drops.status();
  c->has_dump_stats = U(drops->rows[0][0]) > 0;
  c->coll_dropped = U(drops->rows[0][1]);
  c->p2p_dropped = U(drops->rows[0][2]);
  c->dropping_pairs = U(drops->rows[0][3]);
  return Status::Ok();
}

Result<RunCoverage> SummarizeCoverage(Store& store, int32_t run_id, size_t max_listed) {
  const std::string run = std::to_string(run_id);
  RunCoverage c;
  auto totals = store.Query(
      "SELECT count(*), count(*) FILTER (WHERE timing_source IS NOT NULL AND "
      "CAST(timing_source AS VARCHAR) IN ('kernel_cpu', 'collective_cpu')) FROM records WHERE run_id = " + run);
  if (!totals.ok()) return totals.status();
  c.records = U(totals->rows[0][0]);
  c.not_kernel_timed = U(totals->rows[0][1]);
  COLLSCOPE_RETURN_IF_ERROR(CountDrops(store, run_id, &c));
  // coll_sn is NCCL's comm->seqNumber[func]: one count per communicator and collective function.
  auto issued = store.Query(
      "SELECT sum(max_sn - min_sn + 1), sum(max_sn - min_sn + 1 - n) FROM ("
      "SELECT min(r.sn) AS min_sn, max(r.sn) AS max_sn, count(DISTINCT r.sn) AS n "
      "FROM records r JOIN operations o ON o.run_id = r.run_id AND o.op_id = r.op_id "
      "WHERE r.run_id = " + run + " AND o.kind = 'coll' GROUP BY o.comm_id, o.op)");
  if (!issued.ok()) return issued.status();
  c.coll_issued = U(issued->rows[0][0]);
  c.coll_unrecorded = U(issued->rows[0][1]);

  auto incomplete = store.Query(
      "SELECT * FROM (SELECT c.id, coalesce(c.comm_name, '') AS name, c.n_ranks, count(DISTINCT r.rank) AS seen "
      "FROM communicators c JOIN operations o ON o.run_id = c.run_id AND o.comm_id = c.comm_id "
      "JOIN records r ON r.run_id = o.run_id AND r.op_id = o.op_id WHERE c.run_id = " + run +
      " GROUP BY ALL) WHERE seen < n_ranks ORDER BY n_ranks - seen DESC, id");
  if (!incomplete.ok()) return incomplete.status();
  c.incomplete_total = incomplete->rows.size();
  for (const auto& row : incomplete->rows) {
    if (c.incomplete.size() >= max_listed) break;
    c.incomplete.push_back({row[0].value_or(""), row[1].value_or(""), static_cast<int>(I(row[2])),
                            static_cast<int>(I(row[3]))});
  }

  CoverageQuery q;
  q.run_id = run_id;
  auto members = MemberCoverageOf(store, q);
  if (!members.ok()) return members.status();
  for (MemberCoverage& m : *members)
    if (m.relative() < 0.9) c.low.push_back(std::move(m));
  std::stable_sort(c.low.begin(), c.low.end(),
                   [](const MemberCoverage& a, const MemberCoverage& b) { return a.relative() < b.relative(); });
  c.low_total = c.low.size();
  if (c.low.size() > max_listed) c.low.resize(max_listed);

  // Dump passes of each process (one pass: its dumps less than 1 ms apart, as LoadCommData) against the
  // job's last dump: a pause longer than 3 of its usual intervals, or dumps that stop early.
  auto gaps = store.Query(
      "WITH t AS (SELECT DISTINCT process_id, dump_ts_us AS t FROM records WHERE run_id = " + run + "), "
      "d AS (SELECT process_id, t, t - lag(t) OVER (PARTITION BY process_id ORDER BY t) AS dt FROM t), "
      "passes AS (SELECT process_id, t, dt FROM d WHERE dt IS NULL OR dt > 1000), "
      "usual AS (SELECT process_id, median(dt) AS usual, max(t) AS last FROM passes GROUP BY process_id), "
      "job AS (SELECT max(t) AS end_t FROM t) "
      "SELECT * FROM (SELECT p.hostname, p.pid, x.t - x.dt AS a, x.t AS b, u.usual, false "
      "FROM passes x JOIN usual u USING (process_id) "
      "JOIN processes p ON p.run_id = " + run + " AND p.process_id = x.process_id "
      "WHERE x.dt > 3 * u.usual "
      "UNION ALL SELECT p.hostname, p.pid, u.last, job.end_t, u.usual, true FROM usual u CROSS JOIN job "
      "JOIN processes p ON p.run_id = " + run + " AND p.process_id = u.process_id "
      "WHERE u.usual IS NOT NULL AND job.end_t - u.last > 3 * u.usual "
      ") ORDER BY b - a DESC, hostname, pid");
  if (!gaps.ok()) return gaps.status();
  c.gaps_total = gaps->rows.size();
  for (const auto& row : gaps->rows) {
    if (c.gaps.size() >= max_listed) break;
    DumpGap g;
    g.hostname = row[0].value_or("");
    g.pid = U(row[1]);
    g.from_us = I(row[2]);
    g.to_us = I(row[3]);
    g.usual_us = static_cast<int64_t>(row[4] ? std::stod(*row[4]) : 0);
    g.at_end = row[5].value_or("") == "true";
    c.gaps.push_back(std::move(g));
  }
  return c;
}

}  // namespace collscope
