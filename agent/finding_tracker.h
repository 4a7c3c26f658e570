// Which findings are active across the agent's ticks, and which were raised or resolved by the
// latest one: what alerts are made of. A finding is identified by its kind and its root cause
// (hosts and ranks), not by its numbers, which move as the window slides. A finding is raised the
// first tick it appears, and resolved only after it has been absent for `resolve_after` ticks in
// a row, so a fault near the detection limit does not page on and off every tick.
//
// The state survives a restart: Save() gives a text the agent keeps in its store, Load() reads
// it back, so an alert raised before the restart is resolved after it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/status.h"

namespace collscope::agent {

struct TrackedFinding {
  std::string key;            // kind:hosts:ranks
  diagnose::Finding finding;  // the latest version seen
  int64_t first_seen_us = 0;  // wall clock
  int64_t last_seen_us = 0;
  int64_t resolved_us = 0;  // set when resolved
  int missed = 0;           // ticks absent in a row
};

class FindingTracker {
 public:
  explicit FindingTracker(int resolve_after = 2)
      : resolve_after_(resolve_after < 1 ? 1 : resolve_after) {}

  struct Changes {
    std::vector<TrackedFinding> raised, resolved;
  };
  // One tick's findings, at wall time now_us.
  Changes Update(const std::vector<diagnose::Finding>& findings, int64_t now_us);

  // Active findings (including those absent for fewer than resolve_after ticks), by key.
  const std::map<std::string, TrackedFinding>& active() const { return active_; }

  std::string Save() const;
  Status Load(const std::string& saved);

  static std::string KeyOf(const diagnose::Finding& f);

 private:
  int resolve_after_;
  std::map<std::string, TrackedFinding> active_;
};

}  // namespace collscope::agent
