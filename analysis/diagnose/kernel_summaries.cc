#include "analysis/diagnose/kernel_summaries.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "analysis/diagnose/duck.h"
#include "core/readers/kernel_summary.h"

namespace collscope::diagnose {
namespace {

// The standard normal's p-quantile, by bisection on its distribution function: the tables below
// need a few thousand, once.
double NormalQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 100 && hi - lo > 1e-12; ++i) {
    const double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

// The quantiles at (i + 0.5) / n, i < n.
std::vector<double> EvenQuantiles(int n) {
  std::vector<double> z(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) z[static_cast<size_t>(i)] = NormalQuantile((i + 0.5) / n);
  return z;
}

const std::vector<double>& QuantilesOf(int n) {
  static const std::vector<std::vector<double>> table = [] {
    std::vector<std::vector<double>> t;
    for (int k = 0; k <= kSamplesPerSummary; ++k) t.push_back(EvenQuantiles(k));
    return t;
  }();
  if (n <= kSamplesPerSummary) return table[static_cast<size_t>(n)];
  thread_local std::vector<double> beyond;  // a larger cap than the default (tests)
  beyond = EvenQuantiles(n);
  return beyond;
}

// `n` samples shared among the modes in proportion to their counts, by largest remainders (ties: the earlier).
std::vector<int64_t> Apportion(int64_t n, const std::vector<LogNormalMode>& modes) {
  int64_t total = 0;
  for (const LogNormalMode& m : modes) total += m.count;
  std::vector<int64_t> take(modes.size(), 0);
  if (total <= 0) return take;
  std::vector<std::pair<double, size_t>> rest;
  int64_t given = 0;
  for (size_t j = 0; j < modes.size(); ++j) {
    const double exact = static_cast<double>(n) * static_cast<double>(modes[j].count) / static_cast<double>(total);
    take[j] = static_cast<int64_t>(std::floor(exact));
    given += take[j];
    rest.push_back({exact - static_cast<double>(take[j]), j});
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n && k < rest.size(); ++k, ++given) ++take[rest[k].second];
  return take;
}

struct SeriesIndex {
  std::map<std::string, int> name_id;
  std::map<std::pair<int, int>, size_t> at;  // (rank, name) -> series

  KernelSeries& Of(KernelData* d, int rank, const std::string& name) {
    auto [n, fresh_name] = name_id.try_emplace(name, static_cast<int>(d->names.size()));
    if (fresh_name) d->names.push_back(name);
    auto [s, fresh] = at.try_emplace({rank, n->second}, d->series.size());
    if (fresh) {
      KernelSeries ks;
      ks.rank = rank;
      ks.name = n->second;
      ks.total_us = 0;
      d->series.push_back(std::move(ks));
    }
    return d->series[s->second];
  }
};

// A kernel as the detector compares it: its name and launch configuration, "name<<<grid, block>>>"
// (the library keys its summaries so: one name runs tensors of many shapes, and only like
// compares with like across ranks).
constexpr const char* kLaunchedName =
    "name || coalesce('<<<' || array_to_string(grid, 'x') || ', ' || array_to_string(block, 'x') || '>>>', '')";

// One series per (rank, compute kernel), each summary row's samples spread over its window.
Status LoadComputeSeries(duckdb_connection conn, const std::string& rid, KernelData* d) {
  auto k = Fetch(conn,
                 "SELECT CAST(rank AS BIGINT), kernel, CAST(coalesce(step, -1) AS BIGINT), CAST(count AS BIGINT), "
                 "start_us, end_us, total_us, min_us, max_us, CAST(file_id AS BIGINT), CAST(line AS BIGINT), "
                 "CAST(modes[k].count AS BIGINT), CAST(modes[k].centre_us AS DOUBLE), CAST(modes[k].spread AS DOUBLE) "
                 "FROM (SELECT *, " + std::string(kLaunchedName) + " AS kernel, generate_subscripts(modes, 1) AS k "
                 "FROM kernel_summaries WHERE run_id = " + rid + " AND kind = 'compute' AND rank IS NOT NULL) "
                 "ORDER BY rank, kernel, start_us, file_id, line, k",
                 "isiidddddiiidd");
  if (!k.ok()) return k.status();
  const auto& I = k->i;
  const auto& D = k->d;
  SeriesIndex index;
  std::vector<LogNormalMode> modes;
  for (size_t i = 0, j; i < k->rows; i = j) {
    modes.clear();
    for (j = i; j < k->rows && I[3][j] == I[3][i] && I[4][j] == I[4][i]; ++j)
      modes.push_back({I[5][j], D[5][j], D[6][j]});
    KernelSeries& s = index.Of(d, static_cast<int>(I[0][i]), k->s[0][i]);
    const std::vector<double> samples = SummarySamples(I[2][i], D[3][i], D[4][i], modes);
    const double start = D[0][i], span = D[1][i] - D[0][i];
    for (size_t x = 0; x < samples.size(); ++x) {
      s.dur_us.push_back(samples[x]);
      s.start_us.push_back(start + span * (static_cast<double>(x) + 0.5) / static_cast<double>(samples.size()));
      s.step.push_back(I[1][i]);
    }
    s.total_us += D[2][i];
  }
  return Status::Ok();
}

// Per-(rank, step) compute time for the DP x TP/PP grid, and the NCCL kernels' mean durations
// per step window for the synchronisation-trap evidence.
Status LoadStepTotals(duckdb_connection conn, const std::string& rid, KernelData* d) {
  const std::string ranked = " FROM kernel_summaries WHERE run_id = " + rid + " AND rank IS NOT NULL AND step IS NOT NULL";
  auto sc = Fetch(conn,
                  "SELECT CAST(rank AS BIGINT), CAST(sum(total_us) AS DOUBLE)" + ranked +
                      " AND kind = 'compute' GROUP BY rank, step ORDER BY rank, step",
                  "id");
  if (!sc.ok()) return sc.status();
  for (size_t i = 0; i < sc->rows; ++i) d->step_compute.push_back({static_cast<int>(sc->i[0][i]), sc->d[0][i]});
  auto nc = Fetch(conn,
                  "SELECT CAST(rank AS BIGINT), CAST(dense_rank() OVER (ORDER BY " + std::string(kLaunchedName) +
                      ") AS BIGINT), CAST(step AS BIGINT), "
                  "CAST(total_us / count AS DOUBLE)" + ranked + " AND kind = 'nccl'",
                  "iiid");
  if (!nc.ok()) return nc.status();
  for (size_t i = 0; i < nc->rows; ++i)
    d->nccl.push_back({static_cast<int>(nc->i[0][i]), static_cast<int>(nc->i[1][i]), nc->i[2][i], nc->d[0][i]});
  return Status::Ok();
}

}  // namespace

std::vector<double> SummarySamples(int64_t count, double min_us, double max_us, const std::vector<LogNormalMode>& modes,
                                   int cap) {
  std::vector<double> out;
  const std::vector<int64_t> take = Apportion(std::min<int64_t>(count, cap), modes);
  for (size_t j = 0; j < modes.size(); ++j) {
    const std::vector<double>& z = QuantilesOf(static_cast<int>(take[j]));
    for (double q : z) out.push_back(std::clamp(modes[j].centre_us * std::exp(modes[j].spread * q), min_us, max_us));
  }
  return out;
}

Result<KernelData> LoadKernelSummaryData(Store& store, const std::string& run, SummarySource* source) {
  KernelData d;
  if (!readers::HasKernelSummaryTables(store)) return d;
  auto run_id = store.RunId(run, false);
  if (!run_id.ok()) return d;
  const std::string rid = std::to_string(*run_id);
  duckdb_connection conn = store.connection();
  auto files = Fetch(conn,
                     "SELECT path, coalesce(host, ''), CAST(rank AS BIGINT) FROM kernel_summary_files WHERE run_id = " +
                         rid + " ORDER BY file_id",
                     "ssi");
  if (!files.ok()) return files.status();
  std::set<int> ranks;
  for (size_t i = 0; i < files->rows; ++i) {
    if (files->null_i[0][i]) {
      if (source)
        source->unusable.push_back(files->s[0][i] +
                                   ": kernel summaries that name no rank (RANK, OMPI_COMM_WORLD_RANK and SLURM_PROCID "
                                   "were unset): not compared");
      continue;
    }
    const int rank = static_cast<int>(files->i[0][i]);
    ranks.insert(rank);
    if (!files->s[1][i].empty()) d.hosts[rank] = files->s[1][i];
  }
  if (source) {
    source->files += static_cast<int>(files->rows);
    source->ranks += static_cast<int>(ranks.size());
  }
  d.ranks.assign(ranks.begin(), ranks.end());
  COLLSCOPE_RETURN_IF_ERROR(LoadComputeSeries(conn, rid, &d));
  COLLSCOPE_RETURN_IF_ERROR(LoadStepTotals(conn, rid, &d));
  return d;
}

std::vector<Finding> DetectSummaryAnomalies(const KernelData& d, const KernelOptions& o) {
  std::vector<Finding> out = DetectKernelAnomalies(d, o);
  for (Finding& f : out) {
    f.detector = "kernel.summaries";
    f.AddText("kernel_source", "collscope CUPTI kernel summaries (durations rebuilt from each window's modes)");
  }
  return out;
}

}  // namespace collscope::diagnose
