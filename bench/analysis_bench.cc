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

double Seconds(const std::function<bool()>& f, bool* ok) {
  auto t0 = std::chrono::steady_clock::now();
  *ok = f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = std::string(COLLSCOPE_BINARY_DIR) + "/bench/analysis_bench.duckdb";
  uint64_t records = 37500000;
  int repeat = 3;
  int threads = 0;
  std::string sql;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--db")) db = argv[i + 1];
    else if (!std::strcmp(argv[i], "--records")) records = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--sql")) sql = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: analysis_bench [--db F] [--records N] [--repeat K] "
                           "[--threads N] [--sql Q]\n");
      return 2;
    }
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
    }
  }
  auto store = Store::Open(db, {.read_only = true});
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().message().c_str());
    return 1;
  }
  Store& s = **store;
  if (threads > 0) s.Exec("SET threads = " + std::to_string(threads));
  if (!InstallAnalysisViews(s, true).ok()) return 1;
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
      cases.push_back({p.name, [&s, p] {
                         auto r = RunPrimitive(s, p.name, "");
                         if (!r.ok()) std::fprintf(stderr, "%s: %s\n", p.name.c_str(),
                                                   r.status().message().c_str());
                         return r.ok();
                       }});
    }
    std::string out = std::string(COLLSCOPE_BINARY_DIR) + "/bench/analysis_bench_report.html";
    cases.push_back({"report (HTML, whole job)", [&s, out] {
                       ReportOptions o;
                       o.output = out;
                       Status st = WriteReport(s, o);
                       if (!st.ok()) std::fprintf(stderr, "report: %s\n", st.message().c_str());
                       return st.ok();
                     }});
  }
  std::printf("%-34s %9s %9s  %s\n", "primitive", "best s", "median s", "target");
  for (auto& [name, f] : cases) {
    bool ok = true;
    Seconds(f, &ok);  // warm-up (and the first, cold run)
    if (!ok) return 1;
    std::vector<double> t;
    for (int i = 0; i < repeat; ++i) t.push_back(Seconds(f, &ok));
    std::sort(t.begin(), t.end());
    bool report = name.rfind("report", 0) == 0;
    double target = report ? 10.0 : 0.3;
    std::printf("%-34s %9.3f %9.3f  %s %.1f s\n", name.c_str(), t.front(), t[t.size() / 2],
                t.front() <= target ? "<=" : "> ", target);
    std::fflush(stdout);
  }
  return 0;
}
