// Communication-level input of the detectors: processes, communicators and collective
// *instances* (one per communicator, op, sequence number and size, aggregated over the ranks that
// recorded it). Loaded from a store (LoadCommData) or built by hand in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

struct Proc {
  int host = -1;         // index into CommData::hosts
  int global_rank = -1;  // see docs/diagnosis.md: plugin record, world communicator, or ordinal
};

struct Comm {
  std::string id;    // 0x... as Inspector prints it
  std::string name;  // comm_name when present
  int n_ranks = 0;
  int nnodes = 0;
  std::vector<int> procs;  // members (process indexes), in communicator-rank order where known
  std::vector<int> hosts;  // distinct host indexes of the members
};

// One collective instance, aggregated over the ranks that recorded it. The synchronisation trap:
// every member finishes together, so the member that arrived last shows the *shortest* time; its
// time (tmin) is the pure transfer time and (tmed - tmin) is what the others waited for it.
struct Inst {
  int comm = 0;
  int op = 0;          // enum code of coll_op
  int64_t sn = 0;
  int64_t bytes = 0;
  int n = 0;           // ranks that recorded it
  double tmin = 0, tmed = 0, tmax = 0;  // exec time over ranks, microseconds
  int pmin = -1;       // process with the shortest time (arrived last)
  int64_t ts = 0;      // earliest start (or dump) timestamp over ranks, wall-clock us
};

struct CommData {
  std::vector<std::string> hosts;
  std::vector<Proc> procs;
  std::vector<Comm> comms;
  std::vector<Inst> insts;
  int64_t t0 = 0, t1 = 0;   // time range of the data
  bool timestamps_exact = false;  // start timestamps (verbose/plugin) rather than dump times
  std::string rank_source;        // "collscope", "world-communicator", "ordinal"
};

// Loads run `run` (empty: the only/first run) from the store.
Result<CommData> LoadCommData(Store& store, const std::string& run);

struct CommOptions {
  double link_ratio = 1.6;        // comm-window median transfer time / baseline to call it slow
  double host_cover = 0.75;       // share of a host's multi-host comms that must be slow
  double late_share = 0.6;        // share of a rank's instances where it arrived last, late
  int min_late_events = 6;        // and at least this many such instances in the window
  double stall_us = 1e6;          // one wait longer than this (and 20x the norm) is a stall
  double window_us = 0;           // 0: (t1 - t0) / 40, at least 200 ms
};

// slow_link: communicators spanning a host collapse together (transfer time, not arrival skew).
std::vector<Finding> DetectSlowLink(const CommData& d, const CommOptions& o);
// slow_compute and host_stall: a rank that arrives last everywhere (synchronisation trap aware).
std::vector<Finding> DetectSlowCompute(const CommData& d, const CommOptions& o);
// collective_mismatch: ranks of one communicator recorded different sizes or ops for one
// sequence number.
std::vector<Finding> DetectMismatch(const CommData& d);
// hang from completion records: a communicator stopped behind its siblings.
std::vector<Finding> DetectHangFromRecords(const CommData& d);

double Median(std::vector<double> v);

}  // namespace collscope::diagnose
