#include "agent/job_metrics.h"

#include "analysis/views.h"

#include <algorithm>
#include <map>
#include <set>

namespace collscope::agent {
namespace {

double ToDouble(const std::optional<std::string>& v) { return v ? std::stod(*v) : 0; }

// Records dumped this long before the window's start may still belong to an instance inside it
// (a member that joined early); the instance test itself is on start and completion times.
constexpr int64_t kStraddleMarginUs = 60'000'000;

// The window of JobMetrics in SQL terms: the run, and the window's bounds.
struct WindowSql {
  std::string rid, since, until, dumped_since;
};

// Transfer bus bandwidth over the window: each host's best cross-host communicator (the host
// table's rule), and the busiest kernel keys' quantiles. Reads agent_inst.
Status AddBandwidth(Store& store, const WindowSql& w, const JobMetricsOptions& options,
                    std::vector<MetricFamily>* out) {
  // Transfer bus bandwidth: an instance's shortest exec time is its last arriver's, which waited
  // for nobody, so it is the transfer itself; relative to the median of its kernel key.
  const std::string min_bytes = std::to_string(options.min_bytes);
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(
      "CREATE OR REPLACE TEMP TABLE agent_bw AS "
      "SELECT comm_id, op, sn, msg_size_bytes, CAST(op AS VARCHAR) || '/' || n_ranks || 'r/' || "
      "msg_size_bytes AS kernel, "
      "inspector_busbw(op, n_ranks, msg_size_bytes, tmin) AS busbw, tmin FROM agent_inst "
      "WHERE msg_size_bytes >= " +
      min_bytes + " AND tmin > 0;\n"));
  // The host table's rule over the window (analysis/views.h): a host's best cross-host
  // communicator, collectives and point-to-point transfers alike, so a slow NIC's host is the one
  // whose communicators are all slow, not its partners.
  const std::string window_records =
      "(SELECT * FROM records WHERE run_id = " + w.rid + " AND dump_ts_us >= " + w.dumped_since +
      " AND " + diagnose::RecordStartSql("records") + " >= " + w.since + " AND " +
      diagnose::RecordEndSql("records") + " <= " + w.until + ")";
  auto ratio = store.Query("SELECT hostname, transfer_norm_busbw FROM (" +
                           HostTransferTableSql(window_records) + ") ORDER BY 1");
  if (!ratio.ok()) return ratio.status();
  MetricFamily host_bw{"collscope_host_busbw_ratio",
                       "Normalised transfer bus bandwidth of the host's best cross-host "
                       "communicator over the window "
                       "(1: as fast as the job's median; a slow NIC's host is the one whose "
                       "communicators are all slow).",
                       "gauge",
                       {}};
  for (const auto& row : ratio->rows)
    host_bw.Add({{"host", row[0].value_or("")}}, ToDouble(row[1]));
  out->push_back(std::move(host_bw));

  auto keys = store.Query(
      "SELECT kernel, quantile_cont(busbw, 0.1), quantile_cont(busbw, 0.5), quantile_cont(busbw, "
      "0.9) "
      "FROM agent_bw GROUP BY kernel ORDER BY sum(tmin) DESC, kernel LIMIT " +
      std::to_string(options.max_kernel_keys));
  if (!keys.ok()) return keys.status();
  MetricFamily kernel_bw{"collscope_kernel_busbw_bytes_per_second",
                         "Transfer bus bandwidth quantiles of the busiest kernel keys "
                         "(op/ranks/bytes) over the window.",
                         "gauge",
                         {}};
  for (const auto& row : keys->rows) {
    const std::string kernel = row[0].value_or("");
    const char* q[] = {"0.1", "0.5", "0.9"};
    for (int k = 0; k < 3; ++k)
      kernel_bw.Add({{"kernel", kernel}, {"quantile", q[k]}}, ToDouble(row[1 + k]) * 1e9);
  }
  out->push_back(std::move(kernel_bw));
  return Status::Ok();
}

// Coverage: the processes each host has and reports, how far each host's data lags the job's, and
// what its writers dropped during the window.
Status AddCoverage(Store& store, const WindowSql& w, const std::map<std::string, int>& processes_of,
                   const std::map<std::string, int>& reporting, std::vector<MetricFamily>* out) {
  // Coverage: processes reporting, and how far each host's newest record lags the job's.
  MetricFamily known{
      "collscope_host_processes", "Processes the store knows on the host.", "gauge", {}};
  MetricFamily seen{"collscope_host_processes_reporting",
                    "Processes of the host with collective records in the window.",
                    "gauge",
                    {}};
  for (const auto& [host, n] : processes_of) {
    known.Add({{"host", host}}, n);
    seen.Add({{"host", host}}, reporting.count(host) ? reporting.at(host) : 0);
  }
  out->push_back(std::move(known));
  out->push_back(std::move(seen));
  auto lag = store.Query(
      "WITH h AS (SELECT p.hostname, max(r.dump_ts_us) AS last FROM records r JOIN processes p "
      "USING (run_id, process_id) "
      "WHERE r.run_id = " +
      w.rid + " AND r.dump_ts_us >= " + w.dumped_since +
      " GROUP BY 1) "
      "SELECT hostname, (max(last) OVER () - last) / 1e6 FROM h ORDER BY 1");
  if (!lag.ok()) return lag.status();
  MetricFamily data_lag{"collscope_host_data_lag_seconds",
                        "How far the host's newest record lags the newest record of the job.",
                        "gauge",
                        {}};
  for (const auto& row : lag->rows) data_lag.Add({{"host", row[0].value_or("")}}, ToDouble(row[1]));
  out->push_back(std::move(data_lag));
  // Drops within the window: each dump's count since the previous one (a cumulative total per
  // writer would fall whenever a writer stops reporting, which no counter may do).
  auto drops = store.Query(
      "SELECT p.hostname, sum(s.coll_dropped_since_last_dump + s.p2p_dropped_since_last_dump) "
      "FROM dump_stats s JOIN processes p ON p.run_id = s.run_id AND p.process_id = s.process_id "
      "WHERE s.run_id = " +
      w.rid + " AND s.dump_ts_us >= " + w.since + " AND s.dump_ts_us <= " + w.until +
      " GROUP BY 1 ORDER BY 1");
  if (!drops.ok()) return drops.status();
  MetricFamily dropped{
      "collscope_host_window_records_dropped",
      "Records the host's writers dropped during the window (Inspector dump_stats).",
      "gauge",
      {}};
  for (const auto& row : drops->rows)
    dropped.Add({{"host", row[0].value_or("")}}, ToDouble(row[1]));
  out->push_back(std::move(dropped));
  return Status::Ok();
}

}  // namespace

Result<std::vector<MetricFamily>> JobMetrics(Store& store, const std::string& run,
                                             const diagnose::TimeWindow& window,
                                             const JobMetricsOptions& options) {
  auto run_id = store.QueryInt(
      "SELECT CAST(coalesce(max(run_id), -1) AS BIGINT) FROM runs WHERE name = " + SqlString(run));
  if (!run_id.ok()) return run_id.status();
  const std::string rid = std::to_string(*run_id);
  const std::string since = std::to_string(window.since_us),
                    until = std::to_string(window.until_us);
  const std::string dumped_since =
      std::to_string(std::max<int64_t>(0, window.since_us - kStraddleMarginUs));
  // The window's collective records, then its complete instances (every member inside).
  COLLSCOPE_RETURN_IF_ERROR(store.Exec(
      "CREATE OR REPLACE TEMP TABLE agent_w AS "
      "SELECT r.process_id, r.global_rank, r.rank, o.comm_id, o.op, r.sn, "
      "o.msg_size_bytes, c.n_ranks, "
      "CAST(r.exec_time_us AS DOUBLE) AS t, CAST(" +
      diagnose::RecordStartSql("r") + " AS BIGINT) AS ts, CAST(" + diagnose::RecordEndSql("r") +
      " AS BIGINT) AS te "
      "FROM records r JOIN operations o USING (run_id, op_id) "
      "JOIN communicators c ON c.run_id = o.run_id AND c.comm_id = o.comm_id "
      "WHERE r.run_id = " +
      rid + " AND o.kind = 'coll' AND r.dump_ts_us >= " + dumped_since +
      ";\n"
      "CREATE OR REPLACE TEMP TABLE agent_inst AS "
      "SELECT comm_id, op, sn, msg_size_bytes, any_value(n_ranks) AS n_ranks, count(*) "
      "AS n, max(t) AS tmax, "
      "min(t) AS tmin FROM agent_w GROUP BY comm_id, op, sn, msg_size_bytes "
      "HAVING count(*) >= 2 AND min(ts) >= " +
      since + " AND max(te) <= " + until + ";\n"));

  std::vector<MetricFamily> out;
  // Hosts and their processes (all the run knows, so that a silent host shows as 0 reporting).
  auto procs = store.Query(
      "WITH world AS (SELECT r.process_id, min(r.rank) AS world_rank FROM agent_w r "
      "WHERE r.n_ranks = (SELECT count(*) FROM processes WHERE run_id = " +
      rid +
      ") GROUP BY 1), "
      "plugin AS (SELECT process_id, max(global_rank) AS g FROM agent_w GROUP BY 1) "
      "SELECT p.process_id, p.hostname, coalesce(plugin.g, world.world_rank) AS rank FROM "
      "processes p "
      "LEFT JOIN world USING (process_id) LEFT JOIN plugin USING (process_id) "
      "WHERE p.run_id = " +
      rid + " ORDER BY p.hostname, rank NULLS LAST, p.process_id");
  if (!procs.ok()) return procs.status();
  std::map<std::string, std::string> host_of;  // process id -> host
  std::map<std::string, std::string> rank_of;  // process id -> rank label
  std::map<std::string, int> processes_of;
  for (const auto& row : procs->rows) {
    const std::string pid = row[0].value_or(""), host = row[1].value_or("");
    host_of[pid] = host;
    rank_of[pid] = row[2] ? *row[2] : "";
    ++processes_of[host];
  }

  // Arrival delay: how long after the instance's first member each member joined, which is how
  // much longer the first member waited (exec time ends together for every member).
  MetricFamily delay{
      "collscope_rank_arrival_delay_seconds",
      "Median over the window's collectives of how long after the first member this rank joined.",
      "gauge",
      {}};
  auto d = store.Query(
      "SELECT w.process_id, median(i.tmax - w.t) / 1e6, count(*) FROM agent_w w "
      "JOIN agent_inst i USING (comm_id, op, sn, msg_size_bytes) GROUP BY 1");
  if (!d.ok()) return d.status();
  const int world = static_cast<int>(host_of.size());
  const bool grid = options.tp > 0 && options.pp > 0 && world % (options.tp * options.pp) == 0;
  auto rank_labels = [&](const std::string& host, const std::string& rank) {
    Labels l{{"host", host}, {"rank", rank}};
    if (!grid || rank.empty() || rank.starts_with("pid")) return l;
    const int g = std::stoi(rank), per_stage = world / options.pp;
    l.push_back({"tp_rank", std::to_string(g % options.tp)});
    l.push_back({"dp_rank", std::to_string((g % per_stage) / options.tp)});
    l.push_back({"pp_stage", std::to_string(g / per_stage)});
    return l;
  };
  std::map<std::string, std::vector<std::pair<double, std::string>>> delays_by_host;
  std::map<std::string, int> reporting;
  for (const auto& row : d->rows) {
    const std::string pid = row[0].value_or("");
    const std::string& host = host_of[pid];
    ++reporting[host];
    const std::string rank = rank_of[pid].empty() ? "pid" + pid : rank_of[pid];
    delays_by_host[host].push_back({ToDouble(row[1]), rank});
  }
  MetricFamily host_delay{"collscope_host_arrival_delay_seconds",
                          "The largest rank arrival delay of the host's ranks over the window.",
                          "gauge",
                          {}};
  for (auto& [host, v] : delays_by_host) {
    // The latest ranks first, so the cap keeps the ones a dashboard needs.
    std::sort(v.begin(), v.end(), std::greater<>());
    host_delay.Add({{"host", host}}, v.front().first);
    for (size_t k = 0; k < v.size() && static_cast<int>(k) < options.max_ranks_per_host; ++k)
      delay.Add(rank_labels(host, v[k].second), v[k].first);
  }
  out.push_back(std::move(delay));
  out.push_back(std::move(host_delay));

  const WindowSql w{rid, since, until, dumped_since};
  COLLSCOPE_RETURN_IF_ERROR(AddBandwidth(store, w, options, &out));
  COLLSCOPE_RETURN_IF_ERROR(AddCoverage(store, w, processes_of, reporting, &out));

  auto n = store.QueryInt("SELECT CAST(count(*) AS BIGINT) FROM agent_inst");
  if (!n.ok()) return n.status();
  out.push_back(MetricFamily{
      "collscope_window_collectives",
      "Complete collective instances in the diagnosis window.",
      "gauge",
      {}}.Add({}, static_cast<double>(*n)));
  return out;
}

}  // namespace collscope::agent
