// Hang root cause from saved NCCL RAS status reports (core/readers/ras.h); see hang.h.
#include <algorithm>
#include <map>
#include <set>

#include "analysis/diagnose/hang.h"
#include "core/inspector_parser.h"

namespace collscope::diagnose {
namespace {

using readers::RasComm;
using readers::RasProcess;
using readers::RasRank;
using readers::RasReport;

// Confidence in a launch-count mismatch seen in one report, and in one that repeated reports show
// unchanged.
constexpr double kOneReport = 0.6, kUnchanged = 0.9;

struct Culprit {
  const RasComm* comm = nullptr;
  const RasRank* k = nullptr;
  int global = -1;
  const JobProcess* job = nullptr;  // the records' process, when the pid join found it
  double confidence = 0;
  std::string why;  // "launched up to AllReduce operation 911 while 7 ranks reached 912"
};

std::string CommName(const RasComm& c) { return c.hash + (c.label.empty() ? "" : " (" + c.label + ")"); }

// "rank 5 (host 10.0.0.2, pid 4242, GPU 1)", or the process when the global rank is unknown;
// "host node-003, RAS node 10.0.0.4" when the records named the node.
std::string Who(const Culprit& c) {
  std::string where;
  auto add = [&](const std::string& s) { where += (where.empty() ? "" : ", ") + s; };
  if (c.job) add("host " + c.job->hostname + (c.k->host.empty() ? "" : ", RAS node " + c.k->host));
  else if (!c.k->host.empty()) add("host " + c.k->host);
  if (c.k->pid >= 0) add("pid " + std::to_string(c.k->pid));
  if (c.k->cuda_dev >= 0)
    add("GPU " + std::to_string(c.k->cuda_dev) +
        (c.k->nvml_dev >= 0 && c.k->nvml_dev != c.k->cuda_dev ? " (NVML " + std::to_string(c.k->nvml_dev) + ")" : ""));
  std::string who = c.global >= 0        ? "rank " + std::to_string(c.global)
                    : c.comm->hash.empty() ? "the process"
                                           : "rank " + std::to_string(c.k->rank) + " of communicator " + c.comm->hash;
  return who + (where.empty() ? "" : " (" + where + ")");
}

// hang.h: RAS's (node, pid) to the records' processes.
class ProcessJoin {
 public:
  ProcessJoin(const RasReport& r, const std::vector<JobProcess>& job) {
    for (const JobProcess& p : job) {
      by_pid_[p.pid].push_back(&p);
      for (const auto& [id, rank] : p.comm_ranks)
        if (uint64_t hash = 0; ParseHexHash(id, &hash)) by_comm_rank_.emplace(std::pair{hash, rank}, &p);
    }
    auto learn_host = [&](const std::string& node, const std::string& hostname) {
      if (node.empty()) return;
      auto [h, added] = host_of_.emplace(node, hostname);
      if (!added && h->second != hostname) unjoinable_.insert(node);
    };
    auto learn = [&](const std::string& node, int64_t pid) {
      auto it = by_pid_.find(pid);
      if (pid < 0 || it == by_pid_.end() || it->second.size() != 1) return;
      learn_host(node, it->second[0]->hostname);
    };
    for (const RasComm& c : r.comms)
      for (const RasRank& k : c.ranks) {
        if (const JobProcess* p = Exact(c, k)) learn_host(k.host, p->hostname);
        else learn(k.host, k.pid);
      }
    for (const RasProcess& p : r.processes) learn(p.host, p.pid);
  }
  bool empty() const { return by_pid_.empty(); }
  // The records' process that is rank k of communicator c, when the records have it.
  const JobProcess* Exact(const RasComm& c, const RasRank& k) const {
    uint64_t hash = 0;
    if (k.rank < 0 || !ParseHexHash(c.hash, &hash)) return nullptr;
    auto it = by_comm_rank_.find({hash, k.rank});
    return it == by_comm_rank_.end() ? nullptr : it->second;
  }
  // The records' process of RAS's (node, pid); when `global` is known, it must be that rank.
  const JobProcess* Find(const std::string& node, int64_t pid, int global) const {
    auto it = by_pid_.find(pid);
    if (pid < 0 || it == by_pid_.end() || unjoinable_.count(node)) return nullptr;
    auto host = host_of_.find(node);
    const JobProcess* found = nullptr;
    int n = 0;
    for (const JobProcess* p : it->second) {
      if (global >= 0 && p->global_rank != global) continue;
      if (host != host_of_.end() && p->hostname != host->second) continue;
      found = p;
      ++n;
    }
    return n == 1 ? found : nullptr;
  }

 private:
  // By the hash's value: RAS's text form zero-pads it, Inspector does not (ParseHexHash).
  std::map<std::pair<uint64_t, int>, const JobProcess*> by_comm_rank_;
  std::map<int64_t, std::vector<const JobProcess*>> by_pid_;
  std::map<std::string, std::string> host_of_;  // RAS node -> the records' host name
  std::set<std::string> unjoinable_;
};

// The job's processes as the report sees them: its Job summary, or the distinct processes it names.
int64_t JobProcesses(const RasReport& r) {
  if (r.job_processes >= 0) return r.job_processes;
  std::set<std::pair<std::string, int64_t>> procs;
  for (const RasComm& c : r.comms)
    for (const RasRank& k : c.ranks)
      if (k.rank >= 0 && k.pid >= 0) procs.insert({k.host, k.pid});
  for (const auto& p : r.processes) procs.insert({p.host, p.pid});
  return static_cast<int64_t>(procs.size());
}

// The finding of a report with culprits (or unnamed groups): whom it names and why, what it could
// not join to a global rank, and what the counts mean.
void DescribeHang(const RasReport& r, const std::vector<Culprit>& culprits, const std::vector<std::string>& unnamed,
                  std::vector<int> victims, const ProcessJoin& join, bool have_world, int64_t procs, Finding* f) {
  double conf = 0;
  bool only_missing = true;
  for (const Culprit& c : culprits) {
    conf = std::max(conf, c.confidence);
    only_missing &= c.k->state == "missing";
    if (c.global >= 0) f->ranks.push_back(c.global);
    if (c.job) f->hosts.push_back(c.job->hostname);
    else if (!c.k->host.empty()) f->hosts.push_back(c.k->host);
    if (!c.comm->hash.empty()) f->comms.push_back(c.comm->hash);
  }
  if (culprits.empty()) conf = 0.4;  // only unnamed groups: no one to name
  if (r.timeouts > 0) conf *= 0.9;   // RAS timed out gathering: the data may be incomplete
  f->confidence = conf;
  SortUnique(&f->ranks);
  SortUnique(&f->hosts);
  SortUnique(&f->comms);
  SortUnique(&victims);
  std::set_difference(victims.begin(), victims.end(), f->ranks.begin(), f->ranks.end(), std::back_inserter(f->victims));

  std::string s = "Hang: NCCL RAS names ";
  for (size_t i = 0; i < culprits.size() && i < 3; ++i) s += (i ? "; " : "") + Who(culprits[i]) + ": " + culprits[i].why;
  if (culprits.size() > 3) s += "; and " + std::to_string(culprits.size() - 3) + " more";
  if (culprits.empty()) s += unnamed[0];
  s += ". The others wait on " + std::string(culprits.size() + unnamed.size() > 1 ? "them" : "it") + ".";
  f->summary = s;
  for (const Culprit& c : culprits) f->AddText("culprit", Who(c) + ": " + c.why);
  for (const std::string& u : unnamed) f->AddText("unnamed", u + " (the text report counts them without naming them: VERBOSE STATUS or -f json names each)");
  if (!r.format.starts_with("monitor"))
    f->AddText("counts_are_launches",
              "RAS counts operations launched, not completed: a rank stuck inside a kernel shows its peers' count, so a "
              "count behind means the rank did not launch; repeat ncclras to see whether the counts move");
  if (only_missing && !culprits.empty())
    f->AddText("missing_only", "the only signal is data missing from the report (no count, error or dead process): "
                              "confidence lowered");
  for (const Culprit& c : culprits) {
    if (c.global >= 0) continue;
    const std::string no_join = join.empty() ? "no NCCL records were read with it to join its node and pid to a rank"
                                             : "no process of the records has its pid on a host its node can be";
    if (r.format.starts_with("monitor"))
      f->AddText("global_ranks", Who(c) + ": a MONITOR log names processes by node and pid, not ranks, and " + no_join);
    else if (!have_world)
      f->AddText("global_ranks", Who(c) + ": no communicator of the job's size (" + std::to_string(procs) +
                                    " processes) maps it to a global rank, and " + no_join);
    else
      f->AddText("global_ranks", Who(c) + ": its process is not among the world communicator's named ranks, and " + no_join);
  }
  if (r.timeouts > 0) f->Add("ras_timeouts", static_cast<double>(r.timeouts));
  f->AddText("report", r.path + " (" + (r.nccl_version.empty() ? "" : "NCCL " + r.nccl_version + ", ") + r.format + ")");
}

Finding Analyze(const RasReport& r, const std::vector<JobProcess>& job, bool* any) {
  Finding f;
  f.kind = Kind::kHang;
  f.detector = "ras.status";
  // The world communicator: its size is the job's process count; its ranks are global ranks, and
  // the (host, pid) of its named ranks map other communicators' ranks to global ones.
  const int64_t procs = JobProcesses(r);
  const RasComm* world = nullptr;
  for (const RasComm& c : r.comms)
    if (procs > 0 && c.size == procs && !world) world = &c;
  std::map<std::pair<std::string, int64_t>, int> global;
  if (world)
    for (const RasRank& k : world->ranks)
      if (k.rank >= 0 && k.pid >= 0) global[{k.host, k.pid}] = k.rank;
  const ProcessJoin join(r, job);
  auto global_of = [&](const RasComm& c, const RasRank& k) {
    // The records' own process of this rank first: a report that lists only some communicators
    // can take one for the world.
    if (const JobProcess* p = join.Exact(c, k); p && p->global_rank >= 0) return p->global_rank;
    if (&c == world) return k.rank;
    auto it = global.find({k.host, k.pid});
    if (k.pid >= 0 && it != global.end()) return it->second;
    const JobProcess* p = join.Find(k.host, k.pid, -1);
    return p ? p->global_rank : -1;
  };

  std::vector<Culprit> culprits;
  std::set<const RasRank*> blamed;
  std::vector<int> victims;
  std::vector<std::string> unnamed;  // behind or failing groups the text form does not name
  auto blame = [&](const RasComm& c, const RasRank& k, double conf, std::string why) {
    if (blamed.count(&k)) {
      for (Culprit& x : culprits)
        if (x.k == &k) x.why += "; " + why, x.confidence = std::max(x.confidence, conf);
      return;
    }
    blamed.insert(&k);
    const int g = global_of(c, k);
    const JobProcess* exact = join.Exact(c, k);
    culprits.push_back({&c, &k, g, exact ? exact : join.Find(k.host, k.pid, g), conf, std::move(why)});
  };
  for (const RasComm& c : r.comms) {
    // Launch counts per function: the ranks behind the others, when they are fewer than half of
    // the ranks that reported a count, are what the others wait for.
    std::set<std::string> funcs;
    for (const RasRank& k : c.ranks)
      for (const auto& l : k.launched) funcs.insert(l.first);
    for (const std::string& fn : funcs) {
      int64_t top = -1, total = 0, behind = 0, at_top = 0;
      for (const RasRank& k : c.ranks)
        if (k.Launched(fn) >= 0) top = std::max(top, k.Launched(fn)), total += k.n_ranks;
      for (const RasRank& k : c.ranks) {
        if (k.Launched(fn) < 0) continue;
        if (k.Launched(fn) < top) behind += k.n_ranks;
        else at_top += k.n_ranks;
      }
      if (behind == 0 || 2 * behind >= total) continue;
      for (const RasRank& k : c.ranks) {
        const int64_t n = k.Launched(fn);
        if (n < 0) continue;
        const std::string op = fn == "collective" ? "collective" : fn;
        const std::string why = (n == 0 ? "launched no " + op + " operation" : "launched up to " + op + " operation " + std::to_string(n)) +
                                " in communicator " + CommName(c) + " while " + std::to_string(at_top) + " of its " +
                                std::to_string(total) + " reporting ranks reached " + std::to_string(top);
        // One report: a small collective can outrun RAS's gathering, so a running job shows
        // transient mismatches too; counts that stay put across reports are a stall
        // (AnalyzeRasReports).
        if (n < top && k.rank >= 0) blame(c, k, kOneReport, why);
        else if (n < top) unnamed.push_back(std::to_string(k.n_ranks) + " ranks " + why);
        else if (k.rank >= 0 && global_of(c, k) >= 0) victims.push_back(global_of(c, k));
        else if (&c == world && k.n_ranks > 1 && c.size > 0 && total == c.size) {
          // The world's ranks at the top, counted together: every rank not behind.
          std::set<int> named_behind;
          for (const RasRank& b : c.ranks)
            if (b.rank >= 0 && b.Launched(fn) >= 0 && b.Launched(fn) < top) named_behind.insert(b.rank);
          for (int g = 0; g < c.size; ++g)
            if (!named_behind.count(g)) victims.push_back(g);
        }
      }
    }
    // Ranks the report is missing, dead or unresponsive, and ranks with an init or async error.
    for (const RasRank& k : c.ranks) {
      if (k.state == "dead") blame(c, k, 0.85, "its process is considered dead by RAS (communicator " + CommName(c) + ")");
      else if (k.state == "unresponsive") blame(c, k, 0.75, "its process does not respond to RAS (communicator " + CommName(c) + ")");
      else if (k.state == "missing" && k.rank >= 0) blame(c, k, 0.5, "missing from the report (communicator " + CommName(c) + ")");
      else if (k.state == "error" && k.rank >= 0) blame(c, k, 0.85, "reported " + k.detail + " (communicator " + CommName(c) + ")");
      else if (k.state == "error") unnamed.push_back(std::to_string(k.n_ranks) + " ranks of communicator " + CommName(c) + " reported " + k.detail);
    }
  }
  // Job processes RAS considers dead (or is missing), not already named through a communicator.
  std::vector<RasRank> procs_as_ranks;
  procs_as_ranks.reserve(r.processes.size());
  for (const auto& p : r.processes) {
    bool named = false;
    for (const Culprit& c : culprits) named |= c.k->host == p.host && c.k->pid == p.pid;
    if (named) continue;
    RasRank& k = procs_as_ranks.emplace_back();
    k.host = p.host;
    k.pid = p.pid;
    k.state = p.state;
    k.detail = p.events;
  }
  static const RasComm kNoComm;
  for (const RasRank& k : procs_as_ranks) {
    auto it = global.find({k.host, k.pid});
    // A MONITOR log's events say how its peers' RAS threads lost it; an unresponsive process may
    // still recover (the events' own retry and keepalive warnings), a dead one does not.
    const std::string events = k.detail.empty() ? "" : " (MONITOR: " + k.detail + ")";
    int g = it == global.end() ? -1 : it->second;
    const JobProcess* p = join.Find(k.host, k.pid, g);
    if (p) g = p->global_rank;
    Culprit c{&kNoComm, &k, g, p,
              k.state == "dead" ? 0.85 : k.state == "unresponsive" ? 0.6 : 0.5,
              k.state == "dead"           ? "its process is considered dead by RAS" + events
              : k.state == "unresponsive" ? "its peers' RAS threads report it unresponsive" + events
                                          : "RAS has no data from its process"};
    culprits.push_back(std::move(c));
  }
  if (culprits.empty() && unnamed.empty()) return f;
  *any = true;
  DescribeHang(r, culprits, unnamed, std::move(victims), join, world != nullptr, procs, &f);
  return f;
}

}  // namespace

std::vector<Finding> AnalyzeRasReports(const std::vector<RasReport>& reports, const std::vector<JobProcess>& job) {
  std::vector<Finding> out;
  for (const RasReport& r : reports) {
    bool any = false;
    Finding f = Analyze(r, job, &any);
    if (!any) continue;
    // Repeated queries of one hang name the same ranks: one finding, the reports listed. Where
    // they also name the same counts, nothing moved between the queries: a stall, not a
    // transient mismatch.
    auto culprits = [](const Finding& x) {
      std::vector<std::string> v;
      for (const Evidence& e : x.evidence)
        if (e.key == "culprit") v.push_back(e.text);
      return v;
    };
    bool folded = false;
    for (Finding& o : out)
      if (o.ranks == f.ranks && o.hosts == f.hosts && o.comms == f.comms) {
        for (const Evidence& e : f.evidence)
          if (e.key == "report") o.AddText("report", e.text);
        o.confidence = std::max(o.confidence, f.confidence);
        if (culprits(o) == culprits(f)) {
          o.confidence = std::max(o.confidence, kUnchanged);
          bool said = false;
          for (Evidence& e : o.evidence)
            if (e.key == "unchanged_across_reports") e.value += 1, said = true;
          if (!said) o.Add("unchanged_across_reports", 2);
        }
        folded = true;
      }
    if (!folded) out.push_back(std::move(f));
  }
  for (Finding& f : out) {
    bool counts = false, unchanged = false;
    for (const Evidence& e : f.evidence) {
      counts |= e.key == "culprit" && e.text.find(": launched ") != std::string::npos;
      unchanged |= e.key == "unchanged_across_reports";
    }
    if (counts && !unchanged)
      f.AddText("one_report", "the counts come from one report: a running job's small collectives can outrun RAS's "
                              "gathering and look the same; run ncclras again: counts that do not move are a stall");
  }
  return out;
}

}  // namespace collscope::diagnose
