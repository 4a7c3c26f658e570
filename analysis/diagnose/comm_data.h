// Communication-level input of the detectors: processes, communicators and collective
// *instances* (one per communicator, op, sequence number and size, aggregated over the ranks that
// recorded it). Loaded from a store (LoadCommData) or built by hand in tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/diagnose/finding.h"
#include "core/statistics.h"  // Median, which every detector takes of its peers
#include "core/status.h"
#include "core/store.h"

namespace collscope::diagnose {

struct Proc {
  int host = -1;         // index into CommData::hosts
  int global_rank = -1;  // see docs/diagnosis.md: plugin record, world communicator, or ordinal
  int64_t process_id = -1;  // the store's (processes.process_id); -1 when built by hand
  int64_t pid = -1;         // on its host, as the records give it
};

struct Comm {
  std::string id;    // 0x... as Inspector prints it
  std::string name;  // comm_name when present
  int n_ranks = 0;
  int nnodes = 0;
  std::vector<int> procs;  // members (process indexes), in communicator-rank order where known
  std::vector<int> ranks;  // parallel to procs where the records give them: each member's rank here
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
  // The process with the second shortest time and that time (-1: fewer than two members): who
  // arrived last but one, the last of the others where the last member is late for reasons of
  // its own (FindLateEvents).
  int p2 = -1;
  double t2 = 0;
  int64_t ts = 0;      // earliest start (or dump) timestamp over ranks, wall-clock us
  // The earliest it can have completed: ts when start times are known, else the latest over its
  // ranks of the start of the dump pass before the one that wrote it (0: unknown).
  int64_t earliest_ts = 0;
  // Every member of the communicator was logging this op when it ran: none lost its whole log,
  // or the part before or after (a file cut short, a ring that overflowed). Who arrived last is
  // known only then: a member that is never recorded biases the count towards the members it
  // synchronises with, which then seem last whenever it was (a data-parallel partner, say).
  bool members_logging = true;
  // Every member on the last member's host, two or more, arrived after every member on the other
  // hosts (their times are the shortest). Set only in communicators that hold a host with two
  // members among members of several hosts: a slowed host with several members in a group is late
  // as a whole, which chance does rarely (1 in C(n, m)).
  bool host_late = false;
};

// One point-to-point record (pipeline Send/Recv; PyTorch all_to_all as grouped send/recv). The
// same synchronisation trap holds: the side that posted last shows the shorter time.
struct P2p {
  int proc = -1;
  int comm = 0;
  int peer = -1;       // process index of the peer (-1 when unknown)
  bool send = false;
  int64_t bytes = 0;
  double exec = 0;     // microseconds
  int64_t ts = 0;      // start (or dump) timestamp, wall-clock us
  int64_t sn = -1;     // the process's sequence number of the operation on its communicator
  int64_t earliest_ts = 0;  // as Inst::earliest_ts, for this record
};

// One point-to-point transfer between processes on different hosts: a Send and its Recv. NCCL
// delivers one peer's messages in order, so the k-th Send from A to B of a size is the k-th Recv at
// B from A of that size; a log cut short loses its tail, and the pairs up to the shorter side
// still match. Each process numbers its own operations on a communicator, so sequence numbers pair
// them only where the two sides' numbers agree (most of them do, as in a symmetric pipeline): then
// a side missing at the head or in the middle (a ring-buffer drop, a diagnosis window's edge)
// drops its partner instead of shifting every later pair. Where they do not, a side that lost its
// head is found by the waits: the side that posted last waited for nobody, so the shorter time of
// a right pair is the wire's, and a pair shifted by one transfer joins two waits.
struct P2pTransfer {
  int comm = 0, from = -1, to = -1;
  int64_t bytes = 0;
  int64_t order = 0;        // k: its place among the pair's transfers of that size
  double send = 0, recv = 0;
  int64_t ts = 0, earliest = 0;  // completion in [earliest, ts] (Inst::earliest_ts)
  double Wire() const { return send < recv ? send : recv; }
};

// One network send's proxy op (Inspector v4.4 proxy_trace, NCCL_INSPECTOR_ENABLE_PROXY=1): the
// bytes its steps moved and their time on the wire, apart from waiting for the GPU to produce
// or for the receiver's credit. Durations on one host's clock, so clock skew cannot bias them.
struct ProxySend {
  int comm = 0, from = -1, to = -1;  // process indexes of the two ends
  double bytes = 0, wire_us = 0;
  int64_t ts = 0;  // when it completed (its last step's stop, else its dump)
};

struct CommData {
  std::vector<std::string> hosts;
  std::vector<Proc> procs;
  std::vector<Comm> comms;
  std::vector<Inst> insts;
  std::vector<P2p> p2p;
  std::vector<ProxySend> proxy_sends;
  int64_t t0 = 0, t1 = 0;   // time range of the data
  bool timestamps_exact = false;  // start timestamps (verbose/plugin) rather than dump times
  std::string rank_source;        // "collscope", "world-communicator", "ordinal"
  // The parallel layout, inferred from which global ranks each communicator holds (0: unknown):
  // tensor-parallel groups are aligned runs of consecutive ranks that tile the world; pipelines
  // carry point-to-point traffic at stride world / pp.
  int tp = 0, pp = 0;
  // CrossHostP2pTransfers's result, kept for the detectors that read it after the first (three
  // do; pairing a 256-GPU job's transfers took a tenth of its diagnosis each time), and for the
  // p2p records it was made of, told by their address and count: a copy or a reload makes anew.
  struct TransfersMemo {
    const P2p* p2p = nullptr;
    size_t n = 0;
    std::vector<P2pTransfer> transfers;
  };
  mutable std::shared_ptr<const TransfersMemo> cross_host_transfers;
};

// A span of job time (wall-clock microseconds) that a diagnosis reads: what a live agent
// diagnoses each tick. Collective instances count only when every record of theirs lies inside
// (one that straddles an edge would look as if members never joined); point-to-point records by
// their end (a Send and its Recv end together, so a pair stays whole). The default reads everything.
struct TimeWindow {
  int64_t since_us = 0;
  int64_t until_us = INT64_MAX;
  // The job went on writing after until_us (a live agent's window, short of the newest data):
  // communicators behind their siblings at the window's end are at another phase of the step,
  // not hung (a hang stops the job), so the records' hang guess (comm.progress) is not made.
  bool job_continues = false;
  bool all() const { return since_us <= 0 && until_us == INT64_MAX; }
};

// SQL for when a record of table alias `r` started and completed, in wall-clock microseconds:
// its own start and stop where the writer recorded them, else from its dump time, which comes
// after its completion (so a record known only by its dump completed by then and started its
// exec time earlier).
std::string RecordStartSql(const std::string& r);
std::string RecordEndSql(const std::string& r);

// The temporary table collscope_pass_of(process_id, t, prev, start) of run `run_filter` (SQL for a
// run id): each dump time t of a process, the start of its dump pass (its dumps less than 1 ms
// apart) and of the pass before (NULL for the first), where records carry only dump times.
Status CreatePassTable(Store& store, const std::string& run_filter);

// Loads run `run` (empty: the only/first run) from the store, limited to `window`.
Result<CommData> LoadCommData(Store& store, const std::string& run, const TimeWindow& window = {});

struct CommOptions {
  double link_ratio = 1.6;        // comm-window median transfer time / baseline to call it slow
  double host_cover = 0.75;       // share of a host's multi-host comms that must be slow
  double stall_us = 1e6;          // one wait longer than this (and 20x the norm) is a stall
  double window_us = 0;           // 0: (t1 - t0) / 40, at least 200 ms
  // A late rank whose lateness is at least this share explained by its own waiting on others
  // (in other communicators or point-to-point) is a victim of propagation, not a root cause.
  double explained_share = 0.5;
  // pipeline_bubble: extra share of wall time a stage spends waiting for its predecessor's
  // activations, and the share of the stage's pipeline links that must show it.
  double bubble_idle_share = 0.05;
  double bubble_links = 0.75;
  // Where detectors put the candidates their cross-checks dropped, with why (diagnose
  // --explain, the JSON "suppressed" list); null: not kept.
  std::vector<Suppressed>* suppressed = nullptr;
};

// slow_link: communicators spanning a host collapse together (transfer time, not arrival skew).
std::vector<Finding> DetectSlowLink(const CommData& d, const CommOptions& o);
// slow_compute and host_stall: late arrivals judged against peers (late_arrival.h) and stalls.
std::vector<Finding> DetectSlowCompute(const CommData& d, const CommOptions& o);
// slow_link from proxy wire times (proxy.wire): the NIC ends whose sends run slowly on the wire.
std::vector<Finding> DetectSlowWire(const CommData& d, const CommOptions& o);
// collective_mismatch: ranks of one communicator recorded different sizes or ops for one
// sequence number.
std::vector<Finding> DetectMismatch(const CommData& d);
// pipeline_bubble: every pipeline link out of one stage delivers activations late (the next
// stage idles) while the stage's own collectives stay balanced (bubble_detect.cc).
std::vector<Finding> DetectPipelineBubble(const CommData& d, const CommOptions& o);
// Groups of global ranks that do the same work each step: the members of each communicator that
// runs collectives, of 3 or more ranks short of the whole job (tensor-, data-, expert- and
// context-parallel groups stay inside one pipeline stage; the world communicator, 2-rank groups
// such as the first and last stages' embedding group, and pipeline communicators, which carry
// only Send/Recv, span stages). Identical groups are listed once.
std::vector<std::vector<int>> SameWorkGroups(const CommData& d);
// Pipeline stage of every global rank in a pipeline communicator (its communicator rank there);
// what the step-phase bubble check (bubble_steps.h) groups ranks by.
std::map<int, int> PipelineStageOfRank(const CommData& d);
// slow_link from intermittent collapses (link flaps): transfers through one host that take
// several times their peers' usual time, in recurring bursts (link_flap.cc).
std::vector<Finding> DetectLinkFlaps(const CommData& d, const CommOptions& o);
// hang from completion records: a communicator stopped behind its siblings.
std::vector<Finding> DetectHangFromRecords(const CommData& d);

// Every cross-host Send paired with its Recv (P2pTransfer), made once per CommData.
const std::vector<P2pTransfer>& CrossHostP2pTransfers(const CommData& d);
// Per communicator, whether its point-to-point records are an all-to-all (of 3 or more members,
// every one sends to every other: PyTorch's all_to_all as one group of sends and receives). It
// completes as one operation, so each of its pairs waits for the slowest link of the whole group:
// the channel a pair's time measures is the communicator, not the pair.
std::vector<bool> AllToAllComms(const CommData& d);
// Each transfer's usual wire time: the lower quartile of the wire times of its sibling pairs
// (same communicator name and size, same bytes); for a size seen fewer than 8 times, its size at
// the lower quartile of the siblings' time per byte within a factor of two of it. A degraded NIC
// can slow half of a pipeline's pairs, so not their median.
std::vector<double> UsualWireOfSiblings(const CommData& d, const std::vector<P2pTransfer>& pairs);

// Sets CommData::tp and pp from the communicators' members (LoadCommData does).
void InferLayout(CommData* d);
// A communicator as users name it: its comm_name; else, where the layout is known, its place
// in it ("TP group 3 of PP stage 1", "PP group 5", "4-rank group of PP stage 2"); else its id.
std::string CommLabel(const CommData& d, int comm);
// How a slow_network finding's summary ends: why it names no host, and what would.
inline constexpr const char* kUnlocalized =
    "; every slow communicator spans all of these hosts, so the data cannot tell whose NIC or link it is, and none is "
    "named as the cause (point-to-point records would tell: NCCL_INSPECTOR_ENABLE_P2P=1, or the collscope profiler "
    "plugin; proxy traces name the end: NCCL_INSPECTOR_ENABLE_PROXY=1); check their NICs, cables and switch ports.";
// "0x5eed (TP group 3 of PP stage 1)", or the id alone when that is all CommLabel knows.
std::string CommIdAndLabel(const CommData& d, int comm);

// The kernel key of an instance: op, communicator size and node count, message size. Instances
// of one key are peers: they should take the same time.
uint64_t KernelKey(const CommData& d, const Inst& x);
// Whether (nearly) every member recorded the instance, so that it says who arrived last and how
// long the transfer itself took: sampled records (2.29 snapshots) and a member's lost log do not.
bool Complete(const CommData& d, const Inst& x);
// Window length used by the detectors (CommOptions::window_us or a 40th of the data's span).
double WindowUs(const CommData& d, const CommOptions& o);

}  // namespace collscope::diagnose
