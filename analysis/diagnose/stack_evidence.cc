#include "analysis/diagnose/stack_evidence.h"

#include <algorithm>
#include <set>

#include "analysis/diagnose/finding.h"

namespace collscope::diagnose {

void AddStackEvidence(const std::vector<FoldedStack>& stacks, std::vector<Finding>* findings) {
  if (stacks.empty()) return;
  int64_t sampled_until = 0;
  for (const FoldedStack& s : stacks) sampled_until = std::max(sampled_until, s.last_us);
  for (Finding& f : *findings) {
    if (f.kind != Kind::kHang) continue;
    // Stacks said again (a later sample) replace what they said before.
    std::erase_if(f.evidence, [](const Evidence& e) {
      return e.key == "stacks" || e.key.starts_with("stack_frame.rank");
    });
    if (size_t at = f.summary.find(" Its stack: in `"); at != std::string::npos) f.summary.resize(at);
    std::vector<FoldedStack> during;
    for (const FoldedStack& s : stacks)
      if (f.start_us <= 0 || s.last_us >= f.start_us) during.push_back(s);
    if (during.empty()) {
      f.AddText("stacks", "the sampled stacks end at " + FormatTimeUs(sampled_until) +
                              ", before the hang began: not compared");
      continue;
    }
    StackComparison c = CompareProcesses(during);
    std::set<int64_t> outliers;
    for (size_t i : c.outliers) outliers.insert(c.processes[i].rank);
    std::string text;
    auto sentence = [&text](const std::string& s) { text += (text.empty() ? "" : " ") + s; };
    for (int rank : f.ranks) {
      auto p = std::find_if(c.processes.begin(), c.processes.end(),
                            [rank](const ProcessStacks& q) { return q.rank == rank; });
      if (p == c.processes.end()) {
        sentence("rank " + std::to_string(rank) + ": no stacks sampled.");
        continue;
      }
      f.AddText("stack_frame.rank" + std::to_string(rank), p->position_label);
      if (outliers.count(rank)) {
        sentence(DescribeProcess(*p) + ", while " + c.peers_text + ".");
        if (f.ranks.size() == 1 && p->stayed)
          f.summary += " Its stack: in `" + p->position_label + "` for " +
                       DurationText(p->last_us - p->since_us) + ".";
      } else {
        sentence(DescribeProcess(*p) + "; its stacks do not stand apart from its peers'.");
      }
    }
    for (size_t i : c.outliers) {
      const ProcessStacks& p = c.processes[i];
      if (std::find(f.ranks.begin(), f.ranks.end(), p.rank) != f.ranks.end()) continue;
      sentence("The stacks also single out " + DescribeProcess(p) + ".");
    }
    if (f.ranks.empty() || text.empty()) sentence(c.summary);
    f.AddText("stacks", text);
  }
}

}  // namespace collscope::diagnose
