#include "core/readers/ingest_inputs.h"

namespace collscope::readers {

bool InputsReport::NoInputs() const {
  return records.files_seen == 0 && kineto.files_seen == 0 && steps.files_seen == 0 &&
         hang.dumps_seen + hang.states_seen + hang.ras_seen == 0 && kernels.files_seen == 0 &&
         stacks.files_seen == 0 && summaries.files_seen == 0 && prom.files_seen == 0;
}

bool InputsReport::NothingStored() const {
  return records.records_stored + records.dump_stats_stored + kineto.files_read + steps.files_read +
                 hang.dumps_read + hang.states_read + hang.ras_read + kernels.files_read + stacks.files_read +
                 summaries.files_read + prom.files_read ==
             0 &&
         records.files_unchanged + kineto.files_unchanged + summaries.files_unchanged == 0;
}

bool InputsReport::AnythingLost() const {
  return records.lines_rejected || records.records_missing || !records.skipped.empty() ||
         !kineto.failed.empty() || steps.lines_rejected || !steps.failed.empty() ||
         !hang.failed.empty() || hang.ras_lines_unused || kernels.lines_rejected || !kernels.failed.empty() ||
         stacks.lines_rejected || !stacks.failed.empty() ||
         !summaries.failed.empty() || prom.lines_unused || !prom.failed.empty();
}

std::vector<std::string> InputsReport::NotStored() const {
  std::vector<std::string> out;
  for (const std::string& s : records.skipped) out.push_back("skipped " + s);
  for (const auto* list :
       {&kineto.failed, &steps.failed, &hang.failed, &kernels.failed, &stacks.failed, &summaries.failed, &prom.failed})
    for (const std::string& s : *list) out.push_back("not stored: " + s);
  for (const std::string& s : hang.ras_unused) out.push_back("not understood: " + s);
  if (hang.ras_lines_unused > hang.ras_unused.size())
    out.push_back("not understood: " + std::to_string(hang.ras_lines_unused - hang.ras_unused.size()) +
                  " more lines or values of RAS reports");
  for (const std::string& s : prom.unused) out.push_back("not understood: " + s);
  if (prom.lines_unused > prom.unused.size())
    out.push_back("not understood: " + std::to_string(prom.lines_unused - prom.unused.size()) +
                  " more lines or points of NCCL Inspector metric files");
  return out;
}

Result<InputsReport> IngestInputs(Store& store, const std::vector<std::string>& paths,
                                  const IngestOptions& options) {
  InputsReport r;
  std::vector<std::string> others;
  for (const std::string& p : paths)
    if (!IsRecordSummaryRoot(p)) others.push_back(p);
  auto summaries = IngestRecordSummaries(store, paths, options.run);
  if (!summaries.ok()) return summaries.status();
  r.summaries = std::move(*summaries);
  if (others.empty()) return r;
  auto records = Ingest(store, others, options);
  if (!records.ok()) return records.status();
  r.records = std::move(*records);
  auto kineto = IngestKineto(store, others, options.run, options.threads);
  if (!kineto.ok()) return kineto.status();
  r.kineto = std::move(*kineto);
  auto steps = IngestStepFiles(store, others, options.run);
  if (!steps.ok()) return steps.status();
  r.steps = std::move(*steps);
  auto hang = IngestHangEvidence(store, others, options.run);
  if (!hang.ok()) return hang.status();
  r.hang = std::move(*hang);
  auto kernels = IngestKernelSummaries(store, others, options.run);
  if (!kernels.ok()) return kernels.status();
  r.kernels = std::move(*kernels);
  auto stacks = IngestStackFiles(store, others, options.run);
  if (!stacks.ok()) return stacks.status();
  r.stacks = std::move(*stacks);
  auto prom = IngestPromFiles(store, others, options.run);
  if (!prom.ok()) return prom.status();
  r.prom = std::move(*prom);
  return r;
}

}  // namespace collscope::readers
