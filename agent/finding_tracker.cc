#include "agent/finding_tracker.h"

#include <sstream>

namespace collscope::agent {

std::string FindingTracker::KeyOf(const diagnose::Finding& f) {
  std::vector<std::string> hosts = f.hosts;
  std::vector<int> ranks = f.ranks;
  diagnose::SortUnique(&hosts);
  diagnose::SortUnique(&ranks);
  std::string key(diagnose::KindName(f.kind));
  key += ':';
  for (size_t i = 0; i < hosts.size(); ++i) key += (i ? "," : "") + hosts[i];
  key += ':';
  for (size_t i = 0; i < ranks.size(); ++i) key += (i ? "," : "") + std::to_string(ranks[i]);
  return key;
}

FindingTracker::Changes FindingTracker::Update(const std::vector<diagnose::Finding>& findings,
                                               int64_t now_us) {
  Changes ch;
  std::map<std::string, const diagnose::Finding*> now;
  for (const diagnose::Finding& f : findings) {
    // One finding per key: the surest, if the detectors said the same thing twice.
    const std::string key = KeyOf(f);
    auto it = now.find(key);
    if (it == now.end() || f.confidence > it->second->confidence) now[key] = &f;
  }
  for (auto& [key, f] : now) {
    auto it = active_.find(key);
    if (it == active_.end()) {
      TrackedFinding t{key, *f, now_us, now_us, 0, 0};
      active_[key] = t;
      ch.raised.push_back(t);
    } else {
      it->second.finding = *f;
      it->second.last_seen_us = now_us;
      it->second.missed = 0;
    }
  }
  for (auto it = active_.begin(); it != active_.end();) {
    if (!now.count(it->first) && ++it->second.missed >= resolve_after_) {
      it->second.resolved_us = now_us;
      ch.resolved.push_back(it->second);
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  return ch;
}

// One line per finding: first seen, last seen, missed, then its JSON (FindingToJson has no
// newline).
std::string FindingTracker::Save() const {
  std::string out;
  for (const auto& [key, t] : active_)
    out += std::to_string(t.first_seen_us) + " " + std::to_string(t.last_seen_us) + " " +
           std::to_string(t.missed) + " " + diagnose::FindingToJson(t.finding) + "\n";
  return out;
}

Status FindingTracker::Load(const std::string& saved) {
  std::map<std::string, TrackedFinding> loaded;
  std::istringstream in(saved);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    std::istringstream fields(line);
    TrackedFinding t;
    if (!(fields >> t.first_seen_us >> t.last_seen_us >> t.missed))
      return Status::Corruption("saved agent findings, line " + std::to_string(n) + ": no times");
    std::string json;
    std::getline(fields, json);
    std::vector<diagnose::Finding> f;
    const Status parsed = diagnose::FindingsFromJson(
        "{\"schema\": \"" + std::string(diagnose::kFindingsSchema) + "\", \"findings\": [" + json + "]}", &f);
    if (!parsed.ok()) return parsed.WithPrefix("saved agent findings, line " + std::to_string(n) + ": ");
    if (f.size() != 1) return Status::Corruption("saved agent findings, line " + std::to_string(n) + ": not one finding");
    t.finding = f[0];
    t.key = KeyOf(t.finding);
    loaded[t.key] = t;
  }
  active_ = std::move(loaded);
  return Status::Ok();
}

}  // namespace collscope::agent
