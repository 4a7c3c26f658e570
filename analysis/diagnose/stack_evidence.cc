#include "analysis/diagnose/stack_evidence.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/diagnose/finding.h"

namespace collscope::diagnose {

namespace {

constexpr int64_t kMinSamplesInside = 5;
constexpr double kMinGrowth = 0.2;
constexpr size_t kMaxRanksDescribed = 8;  // a hang naming a whole group is not said rank by rank

struct Shares {
  std::map<std::string, int64_t> count;
  std::map<std::string, std::string> label;
  int64_t total = 0;
  double Of(const std::string& p) const {
    auto it = count.find(p);
    return total && it != count.end() ? static_cast<double>(it->second) / static_cast<double>(total)
                                      : 0;
  }
};

void AddTo(Shares* s, const FoldedStack& f) {
  s->count[f.position] += f.count;
  s->label.emplace(f.position, f.position_label);
  s->total += f.count;
}

std::string Percent(double share) {
  return std::to_string(static_cast<int>(share * 100 + 0.5)) + "%";
}

}  // namespace

std::string GrownPosition(const std::vector<FoldedStack>& stacks, int rank, int64_t start_us,
                          int64_t end_us, std::string* text) {
  // A folded row holds the samples of one window; it is inside when its middle is.
  Shares inside, outside, peers;
  for (const FoldedStack& s : stacks) {
    if (s.tid != s.pid) continue;  // main threads
    const int64_t middle = s.first_us + (s.last_us - s.first_us) / 2;
    const bool in = middle >= start_us && (end_us <= start_us || middle < end_us);
    if (s.rank == rank)
      AddTo(in ? &inside : &outside, s);
    else if (in)
      AddTo(&peers, s);
  }
  if (inside.total < kMinSamplesInside) return "";
  const Shares& base = outside.total >= kMinSamplesInside ? outside : peers;
  if (base.total < kMinSamplesInside) return "";
  std::string best;
  double growth = kMinGrowth;
  for (const auto& [position, n] : inside.count) {
    const double g = inside.Of(position) - base.Of(position);
    if (g >= growth) growth = g, best = position;
  }
  if (best.empty()) return "";
  *text = "`" + inside.label[best] + "` in " + Percent(inside.Of(best)) +
          " of its samples during it, " + Percent(base.Of(best)) +
          (&base == &outside ? " outside it" : " of its peers' at the time");
  return best;
}

void AddStackEvidence(const std::vector<FoldedStack>& stacks, std::vector<Finding>* findings,
                      const std::vector<bool>& firing) {
  if (stacks.empty()) return;
  for (size_t i = 0; i < findings->size(); ++i) {
    Finding& f = (*findings)[i];
    if (f.kind != Kind::kHostStall && f.kind != Kind::kSlowCompute) continue;
    std::erase_if(f.evidence,
                  [](const Evidence& e) { return e.key.starts_with("stack_grew.rank"); });
    // A window that ends where its start is has no end (GrownPosition).
    const int64_t end_us = i < firing.size() && firing[i] ? f.start_us : f.end_us;
    for (int rank : f.ranks) {
      std::string text;
      if (!GrownPosition(stacks, rank, f.start_us, end_us, &text).empty())
        f.AddText("stack_grew.rank" + std::to_string(rank), text);
    }
  }
  int64_t sampled_until = 0;
  for (const FoldedStack& s : stacks) sampled_until = std::max(sampled_until, s.last_us);
  for (Finding& f : *findings) {
    if (f.kind != Kind::kHang) continue;
    // Stacks said again (a later sample) replace what they said before.
    std::erase_if(f.evidence, [](const Evidence& e) {
      return e.key == "stacks" || e.key.starts_with("stack_frame.rank");
    });
    if (size_t at = f.summary.find(" Its stack: in `"); at != std::string::npos)
      f.summary.resize(at);
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
    const bool ranked = std::any_of(c.processes.begin(), c.processes.end(),
                                    [](const ProcessStacks& q) { return q.rank >= 0; });
    if (!ranked && !f.ranks.empty())
      sentence("The sampled processes carry no rank (their launcher set no RANK): not joined.");
    size_t described = 0;
    for (int rank : f.ranks) {
      if (!ranked) break;
      if (described++ == kMaxRanksDescribed) {
        sentence("And " + std::to_string(f.ranks.size() - kMaxRanksDescribed) + " more ranks.");
        break;
      }
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
