#include "analysis/diagnose/diagnose.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "analysis/diagnose/hang.h"
#include "analysis/diagnose/steps.h"
#include "core/ingest.h"

namespace collscope::diagnose {
namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Consolidate(std::vector<Finding>* fs) {
  std::stable_sort(fs->begin(), fs->end(), [](const Finding& a, const Finding& b) {
    const bool ha = a.kind == Kind::kHang, hb = b.kind == Kind::kHang;
    if (ha != hb) return ha;
    return a.confidence > b.confidence;
  });
}

Result<std::vector<Finding>> DiagnoseStore(Store& store, const DiagnoseOptions& o,
                                           DiagnoseTiming* timing) {
  double t = Now();
  auto data = LoadCommData(store, o.run);
  if (!data.ok()) return data.status();
  if (timing) timing->load_s = Now() - t;
  t = Now();
  std::vector<Finding> out;
  for (auto* det : {&DetectSlowLink, &DetectSlowCompute, &DetectPipelineBubble}) {
    auto f = det(*data, o.comm);
    out.insert(out.end(), f.begin(), f.end());
  }
  for (auto* det : {&DetectMismatch, &DetectHangFromRecords}) {
    auto f = det(*data);
    out.insert(out.end(), f.begin(), f.end());
  }
  Consolidate(&out);
  if (timing) timing->detect_s = Now() - t;
  return out;
}

Result<std::vector<Finding>> DiagnosePaths(const std::vector<std::string>& paths,
                                           const DiagnoseOptions& o, DiagnoseTiming* timing) {
  namespace fs = std::filesystem;
  std::vector<std::string> logs, fr, inflight, summaries;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::exists(p, ec)) return Status::Error(p + ": no such file or directory");
    auto classify = [&](const fs::path& f) {
      const std::string name = f.filename().string();
      if (name.ends_with(".inflight.json")) inflight.push_back(f.string());
      else if (name == "step_summary.csv") summaries.push_back(f.string());
      else if (IsFlightRecorderDump(f.string())) fr.push_back(f.string());
    };
    if (fs::is_directory(p, ec)) {
      logs.push_back(p);
      for (auto it = fs::recursive_directory_iterator(p, ec); it != fs::recursive_directory_iterator(); ++it)
        if (it->is_regular_file()) classify(it->path());
    } else {
      const std::string name = fs::path(p).filename().string();
      if (name.ends_with(".log") || name.ends_with(".jsonl") || name.ends_with(".log.gz") ||
          name.ends_with(".jsonl.gz"))
        logs.push_back(p);
      else
        classify(p);
    }
  }
  std::vector<Finding> out;
  if (!logs.empty()) {
    auto files = DiscoverInputs(logs);
    if (!files.ok()) return files.status();
    if (!files->empty()) {
      auto store = Store::Open(":memory:");
      if (!store.ok()) return store.status();
      IngestOptions io;
      io.run = "diagnose";
      io.threads = o.threads;
      const double t = Now();
      auto rep = Ingest(**store, *files, io);
      if (!rep.ok()) return rep.status();
      if (timing) timing->ingest_s = Now() - t;
      DiagnoseOptions o2 = o;
      o2.run = "diagnose";
      auto f = DiagnoseStore(**store, o2, timing);
      if (!f.ok()) return f.status();
      out = std::move(*f);
    }
  }
  if (!fr.empty()) {
    auto f = DiagnoseFlightRecorder(fr);
    if (!f.ok()) return f.status();
    // Flight Recorder names the root cause; drop the weaker record-based hang guesses.
    if (!f->empty())
      out.erase(std::remove_if(out.begin(), out.end(), [](const Finding& x) { return x.detector == "comm.progress"; }), out.end());
    out.insert(out.end(), f->begin(), f->end());
  }
  if (!inflight.empty()) {
    auto f = DiagnoseInflight(inflight);
    if (!f.ok()) return f.status();
    if (!f->empty())
      out.erase(std::remove_if(out.begin(), out.end(), [](const Finding& x) { return x.detector == "comm.progress"; }), out.end());
    out.insert(out.end(), f->begin(), f->end());
  }
  for (const std::string& s : summaries) {
    auto series = ReadStepSummary(s);
    if (!series.ok()) return series.status();
    auto f = DetectStepAnomalies(*series, StepOptions{});
    out.insert(out.end(), f.begin(), f.end());
  }
  Consolidate(&out);
  return out;
}

}  // namespace collscope::diagnose
