#include "analysis/diagnose/registry.h"

#include <algorithm>
#include <cmath>
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

// Adds `more` to f's victims, never its own culprits.
void AddVictims(Finding* f, const std::vector<int>& more) {
  f->victims.insert(f->victims.end(), more.begin(), more.end());
  SortUnique(&f->victims);
  std::vector<int> v;
  std::set_difference(f->victims.begin(), f->victims.end(), f->ranks.begin(), f->ranks.end(), std::back_inserter(v));
  f->victims = std::move(v);
}

// f keeps who it names and takes other's victims, communicators, window and confidence as well.
void WidenBy(Finding* f, const Finding& other) {
  AddVictims(f, other.victims);
  f->comms.insert(f->comms.end(), other.comms.begin(), other.comms.end());
  SortUnique(&f->comms);
  f->start_us = std::min(f->start_us, other.start_us);
  f->end_us = std::max(f->end_us, other.end_us);
  f->confidence = std::max(f->confidence, other.confidence);
}

// A slow network's data could not tell its hosts apart, and one of them is late in the very
// communicators it slows: its lateness is its NIC's (its other traffic, unrecorded, crosses it
// slowly), so the link is that host's.
void LocalizeLink(Finding* link, const Finding& late) {
  const size_t suspects = link->hosts.size();
  link->kind = Kind::kSlowLink;
  link->hosts = late.hosts;
  link->ranks = late.ranks;
  AddVictims(link, late.victims);
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

bool OneIsTheWire(const Finding& a, const Finding& b) {
  return (a.detector == "proxy.wire") != (b.detector == "proxy.wire");
}

// The proxy's wire times name the NIC end of a link that the records saw only as slow
// communicators (or as hosts they could not tell apart): the link is that end's, and the other
// finding adds its detector, victims and communicators.
void TakeTheWiresEnd(Finding* a, const Finding& b) {
  const bool a_is_wire = a->detector == "proxy.wire";
  Finding wire = a_is_wire ? *a : b;
  const Finding& other = a_is_wire ? b : *a;
  WidenBy(&wire, other);
  AddVictims(&wire, other.ranks);
  std::string also = other.detector;
  for (const Evidence& e : other.evidence)
    if (e.key == "also_detected_by") also += ", " + e.text;
  wire.AddText("also_detected_by", also);
  *a = std::move(wire);
}

// The wire's host is one of the hosts the records' finding names, in a communicator both saw slow.
bool WireHostAmongTheRecords(const Finding& a, const Finding& b) {
  if (!OneIsTheWire(a, b)) return false;
  const Finding& wire = a.detector == "proxy.wire" ? a : b;
  const Finding& other = a.detector == "proxy.wire" ? b : a;
  return Subset(wire.hosts, other.hosts) && ShareComm(a, b) && OverlapInTime(a, b);
}

// A slow network whose every slow communicator spans a named slow link's host, while the link is
// slow, is that link seen where the data could not tell its hosts apart: it adds no suspect (a
// 256-GPU job from another generator named a degraded NIC's host, then "the network among 4
// hosts" of it and its pipeline group, from the same communicators, as the job ended).
bool NetworkOfTheLinksHost(const Finding& link, const Finding& network) {
  return !link.hosts.empty() && !network.comms.empty() && Subset(link.hosts, network.hosts) &&
         Subset(network.comms, link.comms) && OverlapInTime(link, network);
}

void AddTheNetworksWindow(Finding* link, const Finding& network) {
  AddVictims(link, network.victims);
  link->start_us = std::min(link->start_us, network.start_us);
  link->end_us = std::max(link->end_us, network.end_us);
  link->AddText("also_explains", network.detector + ": the slow network among " +
                                     std::to_string(network.hosts.size()) + " hosts including this one");
}

// One slow network seen in two stretches, its data telling the hosts apart better in one: one's
// hosts hold the other's, they share slow communicators, and their windows overlap or touch. Both
// say it is among the fewer hosts (an independent generator's 2.29 job with a NIC at 47% named a
// network among 8 hosts for 0.6 s, then among 2 of them for 2.4 s, x55008).
bool OneNetworkNarrowed(const Finding& a, const Finding& b) {
  return (Subset(a.hosts, b.hosts) || Subset(b.hosts, a.hosts)) && ShareComm(a, b) &&
         OverlapInTime(a, b);
}

void KeepTheFewerHosts(Finding* a, const Finding& b) {
  const bool b_narrower = b.hosts.size() < a->hosts.size();
  Finding narrow = b_narrower ? b : *a;
  const Finding& wide = b_narrower ? *a : b;
  WidenBy(&narrow, wide);
  narrow.AddText("also_seen_as", "the network among " + std::to_string(wide.hosts.size()) +
                                     " hosts including these");
  *a = std::move(narrow);
}

// A slow network whose every slow communicator is one where a rank late inside its host (no NIC is
// on that path) is late, while it is: its members wait for that rank, and an Inspector time holds
// the wait, so their collectives read as slow transfers. It adds no suspect (an independent
// generator's 32-GPU job on 2.29 logs, with a rank 2.3 ms late at every op, named the rank and
// then its data-parallel group's two hosts as a slow network, x57016).
bool NetworkThatWaitsForAStraggler(const Finding& straggler, const Finding& network) {
  return straggler.ranks.size() == 1 && straggler.Number("late_within_its_host", 0) == 1 &&
         !network.comms.empty() && Subset(straggler.hosts, network.hosts) &&
         Subset(network.comms, straggler.comms) && OverlapInTime(straggler, network);
}

void AddTheWaitingNetwork(Finding* straggler, const Finding& network) {
  AddVictims(straggler, network.victims);
  straggler->AddText("also_explains", network.detector + ": the slow network among " +
                                          std::to_string(network.hosts.size()) +
                                          " hosts, whose communicators wait for this rank");
}

// A stage whose host's network is slow hands its activations late: its own collectives (context
// or data parallel) and sends crawl, and the next stage idles as behind a bubble. A bubble
// finding about that stage (from the records or the step phases), while the link is slow, is the
// link's effect: it adds its detector and victims to the link finding, never its hosts (the
// stage's other host is healthy). A 32-GPU PP 8 CP 2 sweep job named stage 2 beside its slow
// NIC. The same holds for a slow network whose suspect hosts are all the stage's: whichever of
// them has the slow NIC, it is that stage's (a 64-GPU PP 4 sweep job on 2.29 logs named stage 0
// from its step phases while its NIC ran at 40%).
bool BubbleOfTheSlowLinksStage(const Finding& link, const Finding& bubble) {
  return !link.hosts.empty() && Subset(link.hosts, bubble.hosts) && OverlapInTime(link, bubble);
}

void AddTheLinksEffect(Finding* link, const Finding& bubble) {
  AddVictims(link, bubble.victims);
  link->AddText("also_explains", bubble.detector + ": the next pipeline stage waits for the stage on " +
                                     (link->hosts.size() == 1 ? "this host" : "these hosts"));
}

// The symptom and the cause mostly coincide: their overlap is at least half of each one's window
// (a cause that lasted the whole job did not make the step time rise at one step). The step
// series is the whole job's, so any culprit of the job relates to it in space; time says which.
bool Coincide(const Finding& cause, const Finding& symptom) {
  const int64_t overlap = std::min(cause.end_us, symptom.end_us) - std::max(cause.start_us, symptom.start_us);
  return overlap > 0 && 2 * overlap >= symptom.end_us - symptom.start_us &&
         2 * overlap >= cause.end_us - cause.start_us;
}

// What the job lost: the step time's rise (a regression) or spikes (jitter) while the cause lasted.
void AddStepImpact(Finding* cause, const Finding& symptom) {
  if (symptom.kind == Kind::kStepRegression) {
    const double before = symptom.Number("step_us_before"), after = symptom.Number("step_us_after");
    if (before <= 0) return;
    cause->Add("job_step_time_rise_pct", std::round(100 * (after / before - 1)));
    cause->summary += " Meanwhile the job's step time rose " + Fmt("%.0f", 100 * (after / before - 1)) + "% (" +
                      Fmt("%.1f", before / 1e3) + " -> " + Fmt("%.1f", after / 1e3) + " ms).";
  } else {
    cause->Add("job_step_spikes", symptom.Number("spikes"));
    cause->summary += " Meanwhile " + Fmt("%.0f", symptom.Number("spikes")) + " of the job's steps spiked, to up to " +
                      Fmt("%.1f", symptom.Number("worst_ratio")) + "x the median step.";
  }
}

std::vector<Finding> Mismatch(const CommData& d, const CommOptions&) { return DetectMismatch(d); }
std::vector<Finding> Progress(const CommData& d, const CommOptions&) { return DetectHangFromRecords(d); }

// `rank` names one rank, late inside its host, and `host` names more ranks of that host.
bool LateInsideASlowHost(const Finding& rank, const Finding& host) {
  return rank.ranks.size() == 1 && rank.Number("late_within_its_host", 0) == 1 &&
         host.ranks.size() > 1 && std::find(host.ranks.begin(), host.ranks.end(), rank.ranks[0]) != host.ranks.end();
}

// Each names one rank, not the same, and one of them is late inside its host: whatever slows a host
// slows its ranks alike, so that rank is a straggler of its own beside the other (a rank late by
// 2.1 ms at every op and a 1.21x straggler on its host, an independent generator's x44022).
bool TwoRanksOneLateInsideItsHost(const Finding& a, const Finding& b) {
  return a.ranks.size() == 1 && b.ranks.size() == 1 && a.ranks != b.ranks &&
         (a.Number("late_within_its_host", 0) == 1 || b.Number("late_within_its_host", 0) == 1);
}

}  // namespace

const std::vector<DetectorInfo>& Detectors() {
  static const std::vector<DetectorInfo> d = {
      {"comm.slow_link", {Kind::kSlowLink, Kind::kSlowNetwork}, "collective and point-to-point records", 'A',
       &DetectSlowLink},
      {"comm.link_flap", {Kind::kSlowLink, Kind::kSlowNetwork}, "collective and point-to-point records (Send/Recv pairs)", 'A',
       &DetectLinkFlaps},
      {"proxy.wire", {Kind::kSlowLink}, "Inspector v4.4 proxy_trace steps (NCCL_INSPECTOR_ENABLE_PROXY=1)", 'A',
       &DetectSlowWire},
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
      {"steps.stall", {Kind::kHostStall}, "per-rank step phases", 'C', nullptr},
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
       [](const Finding& a, const Finding& b) {
         return a.detector != b.detector && ShareRank(a, b);
       }},
      // One stall: the records' (who the others waited for) and the step phases' (whose own
      // time grew) findings about the same rank.
      {Kind::kHostStall, "the same rank, overlapping windows",
       [](const Finding& a, const Finding& b) { return OverlapInTime(a, b) && ShareRank(a, b); }},
      // One bubble: the records' and the step phases' findings about a stage, and one stage's runs
      // of windows (a 96-GPU PP 8 sweep job named stage 6 five times, in five runs).
      {Kind::kPipelineBubble, "one stage (shared ranks)",
       [](const Finding& a, const Finding& b) { return ShareRank(a, b); }},
      // Which end of the link: the wire times name it where the records name its communicators'
      // hosts.
      {Kind::kSlowLink,
       "the proxy wire times name one end among the hosts of the slow communicators: the link is "
       "that end's",
       &WireHostAmongTheRecords, false, Kind::kCount, &TakeTheWiresEnd},
      // One link: a degradation seen in two runs of windows, or a flap that also slowed windows.
      {Kind::kSlowLink, "the same hosts' link",
       [](const Finding& a, const Finding& b) { return a.hosts == b.hosts; }},
      {Kind::kSlowNetwork, "the same hosts' network",
       [](const Finding& a, const Finding& b) { return a.hosts == b.hosts; }},
      // A slow network's one late host is its link's host, unless the host is late inside itself
      // too, where no NIC is on the path: a straggler of its own (a 96-GPU sweep job with a slow
      // GPU on one host and a slow NIC on another named the GPU's host as the link).
      {Kind::kSlowNetwork,
       "a slow network's hosts hold exactly one late host, late in the communicators the network "
       "slows and not inside itself, overlapping windows: the link is that host's",
       [](const Finding& a, const Finding& b) {
         return b.hosts.size() == 1 && Subset(b.hosts, a.hosts) && ShareComm(a, b) && OverlapInTime(a, b) &&
                b.Number("late_within_its_host", 0) == 0;
       },
       false, Kind::kSlowCompute, LocalizeLink},
      {Kind::kSlowNetwork,
       "the proxy wire times name one of a slow network's hosts, in the communicators it slows: "
       "the link is that host's",
       [](const Finding& a, const Finding& b) {
         return b.detector == "proxy.wire" && Subset(b.hosts, a.hosts) && ShareComm(a, b) && OverlapInTime(a, b);
       },
       false, Kind::kSlowLink, TakeTheWiresEnd},
      {Kind::kSlowLink,
       "a slow network whose every slow communicator spans the slow link's host, while it is slow: "
       "the link",
       &NetworkOfTheLinksHost, false, Kind::kSlowNetwork, &AddTheNetworksWindow},
      // After the rules that find a network's link, so that each stretch is tested for its own.
      {Kind::kSlowNetwork,
       "one network narrowed: one's hosts hold the other's, sharing slow communicators, "
       "overlapping "
       "windows: the fewer hosts",
       &OneNetworkNarrowed, false, Kind::kCount, &KeepTheFewerHosts},
      {Kind::kSlowLink,
       "a bubble of the pipeline stage on the slow link's host, overlapping windows: a stage whose "
       "network is slow hands its activations late",
       &BubbleOfTheSlowLinksStage, false, Kind::kPipelineBubble, &AddTheLinksEffect},
      {Kind::kSlowNetwork,
       "a bubble of the pipeline stage on all of a slow network's hosts, overlapping windows: a "
       "stage whose network is slow hands its activations late",
       &BubbleOfTheSlowLinksStage, false, Kind::kPipelineBubble, &AddTheLinksEffect},
      {Kind::kSlowCompute,
       "a slow network whose every slow communicator is one where a rank late inside its host is "
       "late, overlapping windows: its members wait for that rank",
       &NetworkThatWaitsForAStraggler, false, Kind::kSlowNetwork, &AddTheWaitingNetwork},
      // One compute straggler: one host (or hosts one covers, as a slow stage does), whichever
      // detector saw it. But a rank late inside its host (where its host mates share whatever slows
      // the host) beside a finding that names other ranks of the host too is a second straggler: a
      // slow host and, apart from it, one of its ranks.
      {Kind::kSlowCompute,
       "the same host (or a host set one covers), overlapping windows, unless one is a rank late "
       "inside a host the other names more ranks of, or another rank than the other names",
       [](const Finding& a, const Finding& b) {
         return !a.hosts.empty() && !b.hosts.empty() && (Subset(b.hosts, a.hosts) || Subset(a.hosts, b.hosts)) &&
                OverlapInTime(a, b) && !LateInsideASlowHost(a, b) && !LateInsideASlowHost(b, a) &&
                !TwoRanksOneLateInsideItsHost(a, b);
       }},
      // A step-level symptom is the impact of the causes that lasted as long as it did (after the
      // merges above, so each cause is counted once).
      {Kind::kStepRegression, "the step time rose while the cause lasted (windows mostly coincide)",
       &Coincide, false, Kind::kCount, &AddStepImpact, true},
      {Kind::kStepJitter, "the steps spiked while the cause lasted (windows mostly coincide)",
       &Coincide, false, Kind::kCount, &AddStepImpact, true},
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
