#include "analysis/diagnose/registry.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace collscope::diagnose {
namespace {

bool Subset(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& x : a)
    if (std::find(b.begin(), b.end(), x) == b.end()) return false;
  return true;
}

bool ShareRank(const Finding& a, const Finding& b) {
  for (int r : b.ranks)
    if (std::find(a.ranks.begin(), a.ranks.end(), r) != a.ranks.end()) return true;
  return false;
}

bool OverlapInTime(const Finding& a, const Finding& b) { return b.start_us <= a.end_us && a.start_us <= b.end_us; }

bool ShareComm(const Finding& a, const Finding& b) {
  for (const std::string& c : b.comms)
    if (std::find(a.comms.begin(), a.comms.end(), c) != a.comms.end()) return true;
  return false;
}

// A slow network's data could not tell its hosts apart, and one of them is late in the very
// communicators it slows: its lateness is its NIC's (its other traffic, unrecorded, crosses it
// slowly), so the link is that host's.
void LocalizeLink(Finding* link, const Finding& late) {
  const size_t suspects = link->hosts.size();
  link->kind = Kind::kSlowLink;
  link->hosts = late.hosts;
  link->ranks = late.ranks;
  link->victims.insert(link->victims.end(), late.victims.begin(), late.victims.end());
  SortUnique(&link->victims);
  std::vector<int> v;
  std::set_difference(link->victims.begin(), link->victims.end(), link->ranks.begin(), link->ranks.end(),
                      std::back_inserter(v));
  link->victims = std::move(v);
  link->confidence = std::min(1.0, std::max(link->confidence * static_cast<double>(suspects), late.confidence));
  for (Evidence& e : link->evidence)
    if (e.key == "ambiguous")
      e.text = "resolved: of the " + std::to_string(suspects) + " hosts the slow communicators span, only " +
               late.hosts[0] + "'s ranks arrive late in them";
  const size_t cut = link->summary.find(kUnlocalized);
  if (cut != std::string::npos) link->summary.resize(cut);
  const size_t verb = link->summary.find(" is degraded");
  if (verb != std::string::npos) link->summary.replace(0, verb, "The network link of host " + late.hosts[0]);
  link->summary += "; check its NICs, cables and switch ports: of the " + std::to_string(suspects) +
                   " hosts the slow communicators span, only " + late.hosts[0] + "'s ranks arrive late in them.";
  link->AddText("also_detected_by", late.detector);
}

std::vector<Finding> Mismatch(const CommData& d, const CommOptions&) { return DetectMismatch(d); }
std::vector<Finding> Progress(const CommData& d, const CommOptions&) { return DetectHangFromRecords(d); }

}  // namespace

const std::vector<DetectorInfo>& Detectors() {
  static const std::vector<DetectorInfo> d = {
      {"comm.slow_link", {Kind::kSlowLink, Kind::kSlowNetwork}, "collective and point-to-point records", 'A',
       &DetectSlowLink},
      {"comm.link_flap", {Kind::kSlowLink}, "collective and point-to-point records (Send/Recv pairs)", 'A',
       &DetectLinkFlaps},
      {"comm.late_arrival", {Kind::kSlowCompute}, "collective records (complete or sampled), point-to-point records",
       'A', &DetectSlowCompute},
      {"comm.stall", {Kind::kHostStall, Kind::kSlowCompute}, "collective and point-to-point records", 'A', nullptr},
      {"comm.pipeline_bubble", {Kind::kPipelineBubble}, "point-to-point records of pipeline communicators", 'A',
       &DetectPipelineBubble},
      {"comm.mismatch", {Kind::kCollectiveMismatch}, "complete collective records", 'A', &Mismatch},
      {"comm.progress", {Kind::kHang}, "complete collective records", 'A', &Progress, true},
      {"inflight.state", {Kind::kHang, Kind::kCollectiveMismatch}, "collscope in-flight state files", 'B', nullptr},
      {"flight_recorder.wait_graph", {Kind::kHang}, "PyTorch Flight Recorder dumps", 'B', nullptr},
      {"ras.status", {Kind::kHang}, "NCCL RAS status reports (ncclras)", 'A', nullptr},
      {"steps.pelt", {Kind::kStepRegression}, "step series (steps, phases)", 'C', nullptr},
      {"steps.window", {Kind::kStepJitter}, "step series", 'C', nullptr},
      {"steps.compute", {Kind::kSlowCompute}, "per-rank step phases", 'C', nullptr},
      {"steps.stage_idle", {Kind::kPipelineBubble}, "per-rank step phases and pipeline communicators", 'C', nullptr},
      {"kernel.modes", {Kind::kSlowCompute}, "kernels (Kineto traces)", 'D', nullptr},
      {"kernel.summaries", {Kind::kSlowCompute}, "kernel summaries (collscope CUPTI library)", 'D', nullptr},
  };
  return d;
}

const std::vector<MergeRule>& MergeRules() {
  static const std::vector<MergeRule> r = {
      // One hang stops the job: a finding that names no root cause (completion records) is the
      // same hang as any more confident hang finding, whichever inputs they came from.
      {Kind::kHang, "one hang stops the job: a finding naming no root cause is the same hang",
       [](const Finding&, const Finding& b) { return b.ranks.empty(); }, true},
      // Flight Recorder dumps, in-flight state files and RAS reports that blame the same rank
      // describe one hang.
      {Kind::kHang, "they blame the same rank, from different inputs",
       [](const Finding& a, const Finding& b) { return a.detector != b.detector && ShareRank(a, b); }},
      // One bubble: the records' and the step phases' findings about a stage.
      {Kind::kPipelineBubble, "one stage (shared ranks), overlapping windows",
       [](const Finding& a, const Finding& b) { return ShareRank(a, b) && OverlapInTime(a, b); }},
      // One link: a degradation seen in two runs of windows, or a flap that also slowed windows.
      {Kind::kSlowLink, "the same hosts' link", [](const Finding& a, const Finding& b) { return a.hosts == b.hosts; }},
      {Kind::kSlowNetwork, "the same hosts' network",
       [](const Finding& a, const Finding& b) { return a.hosts == b.hosts; }},
      // A slow network's one late host is its link's host.
      {Kind::kSlowNetwork,
       "a slow network's hosts hold exactly one late host, late in the communicators the network "
       "slows, overlapping windows: the link is that host's",
       [](const Finding& a, const Finding& b) {
         return b.hosts.size() == 1 && Subset(b.hosts, a.hosts) && ShareComm(a, b) && OverlapInTime(a, b);
       },
       false, Kind::kSlowCompute, LocalizeLink},
      // One compute straggler: one host (or hosts one covers, as a slow stage does), whichever
      // detector saw it.
      {Kind::kSlowCompute, "the same host (or a host set one covers), overlapping windows",
       [](const Finding& a, const Finding& b) {
         return !a.hosts.empty() && !b.hosts.empty() && (Subset(b.hosts, a.hosts) || Subset(a.hosts, b.hosts)) &&
                OverlapInTime(a, b);
       }},
  };
  return r;
}

std::string RegistryToText() {
  std::string o = "detectors (name, tier, kinds, inputs):\n";
  for (const DetectorInfo& d : Detectors()) {
    o += "  " + d.name + "  tier " + std::string(1, d.tier) + "  ";
    for (size_t i = 0; i < d.kinds.size(); ++i) o += (i ? "," : "") + std::string(KindName(d.kinds[i]));
    o += "  " + d.inputs + "\n";
  }
  o += "merge rules (kind: relation):\n";
  for (const MergeRule& m : MergeRules()) o += "  " + std::string(KindName(m.kind)) + ": " + m.relation + "\n";
  return o;
}

}  // namespace collscope::diagnose
