// Analysis benchmark: builds (once, cached) a store of 37.5 M synthetic records of a 2,048-GPU job
// (bench/analysis_bench_data.h), then times every analysis primitive through its C++ function
// (each runs its SQL view or macro) and the HTML report, printing one line each.
//
// Usage: analysis_bench [--db FILE] [--records N] [--repeat K] [--threads N] [--sql QUERY]
//   --db       store to use (default build/bench/analysis_bench.duckdb); rebuilt when it does not
//              hold exactly N records
//   --records  default 37500000 (NIXT's 2,048-GPU Nemotron job)
//   --repeat   timed runs per primitive after one warm-up; the best and the median are printed
//   --sql      time one query instead (after the analysis views are installed)
//   --only     comma-separated primitives (and/or "report") to time
//   --raw      ignore the agg_* aggregates (every view reads the records): the "before" numbers
//   --refresh  recompute the aggregates (RefreshAggregates) and print its cost first
// The store is generated once and reused while it holds N records; aggregates are made right
// after generation, as `collscope ingest` does.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "analysis/primitives.h"
#include "analysis/report.h"
#include "analysis/views.h"
#include "bench/analysis_bench_data.h"
#include "core/store.h"

using namespace collscope;

namespace {

double CpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double last_cpu = 0;  // CPU seconds (all threads) of the last Seconds() call

double Seconds(const std::function<bool()>& f, bool* ok) {
  double c0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  *ok = f();
  last_cpu = CpuSeconds() - c0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool Selected(const std::string& only, const std::string& name) {
  if (only.empty()) return true;
  std::string list = "," + only + ",";
  return list.find("," + name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = std::string(COLLSCOPE_BINARY_DIR) + "/bench/analysis_bench.duckdb";
  uint64_t records = 37500000;
  int repeat = 3;
  int threads = 0;
  std::string sql, only;
  bool raw = false, refresh = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--raw")) { raw = true; continue; }
    if (!std::strcmp(argv[i], "--refresh")) { refresh = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", argv[i]); return 2; }
    if (!std::strcmp(argv[i], "--db")) db = argv[i + 1];
    else if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    else if (!std::strcmp(argv[i], "--records")) records = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--sql")) sql = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: analysis_bench [--db F] [--records N] [--repeat K] "
                           "[--threads N] [--sql Q] [--only a,b] [--raw] [--refresh]\n");
      return 2;
    }
    ++i;
  }
  {
    bool rebuild = !std::filesystem::exists(db);
    if (!rebuild) {
      auto s = Store::Open(db);
      if (!s.ok()) {
        rebuild = true;
      } else {
        auto n = (*s)->QueryInt("SELECT count(*) FROM records");
        rebuild = !n.ok() || static_cast<uint64_t>(*n) != records;
      }
    }
    if (rebuild) {
      std::filesystem::remove(db);
      std::filesystem::remove(db + ".wal");
      auto s = Store::Open(db);
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.status().message().c_str());
        return 1;
      }
      std::printf("generating %llu records into %s ...\n",
                  static_cast<unsigned long long>(records), db.c_str());
      std::fflush(stdout);
      bool ok = true;
      double t = Seconds([&] {
        Status st = (*s)->Exec(bench::SyntheticJobSql(records));
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
        return st.ok() && InstallAnalysisViews(**s, false).ok() && (*s)->Exec("CHECKPOINT").ok();
      }, &ok);
      if (!ok) return 1;
      std::printf("generated in %.1f s, store %.0f MB\n", t,
                  std::filesystem::file_size(db) / 1e6);
      refresh = true;
    }
    if (refresh) {
      auto s = Store::Open(db);
      if (!s.ok()) return 1;
      if (threads > 0 && !(*s)->Exec("SET threads = " + std::to_string(threads)).ok()) return 1;
      bool ok = true;
      double t = Seconds([&] {
        Status st = (*s)->Exec("DELETE FROM agg_meta");  // absent before the first refresh
        Result<AggregateReport> r = RefreshAggregates(**s);
        if (!r.ok()) std::fprintf(stderr, "aggregates: %s\n", r.status().message().c_str());
        return r.ok() && (*s)->Exec("CHECKPOINT").ok();
      }, &ok);
      if (!ok) return 1;
      auto rows = (*s)->Query(
          "SELECT 'agg_cells', count(*) FROM agg_cells UNION ALL SELECT 'agg_values', count(*) "
          "FROM agg_values UNION ALL SELECT 'agg_proc_ops', count(*) FROM agg_proc_ops UNION ALL "
          "SELECT 'agg_time', count(*) FROM agg_time UNION ALL SELECT 'agg_range_bars', count(*) "
          "FROM agg_range_bars");
      std::printf("aggregates (RefreshAggregates + checkpoint): %.1f s wall, %.1f s CPU;", t,
                  last_cpu);
      if (rows.ok())
        for (const auto& r : rows->rows) std::printf(" %s %s", r[0]->c_str(), r[1]->c_str());
      std::printf("\n");
    }
  }
  auto store = Store::Open(db, Store::Options::ReadOnly());
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().message().c_str());
    return 1;
  }
  Store& s = **store;
  if (threads > 0 && !s.Exec("SET threads = " + std::to_string(threads)).ok()) return 1;
  if (!InstallAnalysisViews(s, true, !raw).ok()) return 1;
  auto n = s.QueryInt("SELECT count(*) FROM records");
  auto th = s.QueryInt("SELECT current_setting('threads')");
  std::printf("store %s: %lld records, %lld DuckDB threads\n", db.c_str(),
              static_cast<long long>(n.ok() ? *n : -1), static_cast<long long>(th.ok() ? *th : -1));

  std::vector<std::pair<std::string, std::function<bool()>>> cases;
  if (!sql.empty()) {
    cases.push_back({"sql", [&] {
                       auto r = s.Query(sql);
                       if (!r.ok()) std::fprintf(stderr, "%s\n", r.status().message().c_str());
                       else std::printf("  %zu rows\n", r->rows.size());
                       return r.ok();
                     }});
  } else {
    for (const PrimitiveInfo& p : Primitives()) {
      if (!Selected(only, p.name)) continue;
      cases.push_back({p.name, [&s, p] {
                         auto r = RunPrimitive(s, p.name, "");
                         if (!r.ok()) std::fprintf(stderr, "%s: %s\n", p.name.c_str(),
                                                   r.status().message().c_str());
                         return r.ok();
                       }});
    }
    std::string out = std::string(COLLSCOPE_BINARY_DIR) + "/bench/analysis_bench_report.html";
    if (Selected(only, "report")) cases.push_back({"report (HTML, whole job)", [&s, out] {
                       ReportOptions o;
                       o.output = out;
                       Status st = WriteReport(s, o);
                       if (!st.ok()) std::fprintf(stderr, "report: %s\n", st.message().c_str());
                       return st.ok();
                     }});
  }
  std::printf("%-34s %9s %9s %9s  %s\n", "primitive", "best s", "median s", "CPU s", "target");
  for (auto& [name, f] : cases) {
    bool ok = true;
    double warm = Seconds(f, &ok);  // warm-up (and the first, cold run)
    double warm_cpu = last_cpu;
    if (!ok) return 1;
    std::vector<double> t, cpu;
    for (int i = 0; i < repeat; ++i) {
      t.push_back(Seconds(f, &ok));
      cpu.push_back(last_cpu);
    }
    if (t.empty()) t.push_back(warm), cpu.push_back(warm_cpu);  // --repeat 0: the cold run
    std::sort(t.begin(), t.end());
    std::sort(cpu.begin(), cpu.end());
    bool report = name.rfind("report", 0) == 0;
    double target = report ? 10.0 : 0.3;
    std::printf("%-34s %9.3f %9.3f %9.3f  %s %.1f s\n", name.c_str(), t.front(),
                t[t.size() / 2], cpu.front(), t.front() <= target ? "<=" : "> ", target);
    std::fflush(stdout);
  }
  return 0;
}
