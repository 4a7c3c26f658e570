// Coverage: how much of a job's communication the store holds, and what was lost where. The
// baseline is the peers, not a nominal rate: a member of a communicator recorded `seen` of the
// collective instances that any member recorded (`known`), so what every member lacks alike (ops
// under NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES, records discarded as not kernel-timed, a 2.29
// snapshot's sampling) does not make one rank look less covered than the others; a member's own
// loss (its ring overwritten, its log cut short, dumps missing) does.
//
// Read by `collscope summary` (what was lost, per rank) and by diagnose, whose findings state the
// coverage of the ranks they name and weigh their confidence by it (docs/diagnosis.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/store.h"

namespace collscope {

// One member of a communicator, for one collective op, over a span of time.
struct MemberCoverage {
  int64_t process_id = 0;
  std::string hostname;
  uint64_t pid = 0;
  std::string comm;       // the communicator's id as Inspector prints it (0x...)
  std::string comm_name;  // empty when the log has none
  int rank = -1;          // rank within the communicator
  std::string op;         // AllReduce, AllGather, ...
  uint64_t seen = 0;      // instances (sequence numbers) this member recorded
  uint64_t known = 0;     // instances any member of the communicator recorded
  double peer_share = 1;  // median share seen/known of the other members (1 without others)
  double share() const { return known ? static_cast<double>(seen) / static_cast<double>(known) : 0; }
  // Its share against its peers', at most 1: below 1 the member lost what its peers kept.
  double relative() const;
};

struct CoverageQuery {
  int32_t run_id = 0;
  // The instances (sequence numbers of each communicator and op) between the first and the last
  // whose time lies in [since_us, until_us]: its members' earliest start, or dump where a record
  // has no timestamps (wall clock, as the detectors place instances), with every member's records
  // of them wherever dumped. The default: every record.
  int64_t since_us = 0, until_us = INT64_MAX;
  std::vector<std::string> comms;  // only these communicators (0x... ids); empty: all
};

// Every (member, communicator, collective op) in the query's span, members that recorded
// nothing of an op in it excepted (RunCoverage::incomplete lists communicators missing members).
Result<std::vector<MemberCoverage>> MemberCoverageOf(Store& store, const CoverageQuery& q);

// A communicator some of whose members left no record at all in the run.
struct IncompleteCommunicator {
  std::string comm, comm_name;
  int n_ranks = 0, ranks_seen = 0;
};

// A process whose dumps stop short of the job's, or pause: windows with no records from it.
struct DumpGap {
  std::string hostname;
  uint64_t pid = 0;
  int64_t from_us = 0, to_us = 0;  // no dump of this process in between
  int64_t usual_us = 0;            // its median interval between dumps
  bool at_end = false;             // its dumps stop while the job's go on until to_us
};

struct RunCoverage {
  uint64_t records = 0;
  uint64_t not_kernel_timed = 0;  // records timed on the CPU (kernel_cpu, collective_cpu)
  // Inspector's own drop counters (dump_stats, v4.1+), summed over processes and communicators
  // (the last total of each), and how many (process, communicator) pairs dropped any.
  uint64_t coll_dropped = 0, p2p_dropped = 0, dropping_pairs = 0;
  bool has_dump_stats = false;
  // Collective instances issued between each communicator's first and last recorded sequence
  // number of each function, and those no member recorded (under the size cutoff, discarded as not kernel-timed,
  // dropped from every member's ring, or not sampled).
  uint64_t coll_issued = 0, coll_unrecorded = 0;
  std::vector<IncompleteCommunicator> incomplete;  // at most max_listed, largest gap first
  uint64_t incomplete_total = 0;
  std::vector<MemberCoverage> low;  // relative() < 0.9, at most max_listed, lowest first
  uint64_t low_total = 0;
  std::vector<DumpGap> gaps;        // at most max_listed, longest first
  uint64_t gaps_total = 0;
};

Result<RunCoverage> SummarizeCoverage(Store& store, int32_t run_id, size_t max_listed);

// Inspector's drop counters of a run (RunCoverage's coll_dropped, p2p_dropped, dropping_pairs and
// has_dump_stats alone): cheap, for every diagnosis to say what was lost.
Status CountDrops(Store& store, int32_t run_id, RunCoverage* c);

}  // namespace collscope
