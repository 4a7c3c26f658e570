// Output writers of the simulator: NCCL Inspector JSON lines (with the plugin's dump model),
// PyTorch-profiler (Kineto) Chrome traces, and the per-step summary CSV.
#pragma once

#include <cstdint>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/cupti/summarizer.h"
#include "sim/internal.h"

namespace collscope::sim {

// Appends integers / fixed-point numbers without locale or printf overhead.
void AppendU64(std::string* s, uint64_t v);
void AppendI64(std::string* s, int64_t v);
void AppendFixed6(std::string* s, double v);  // printf("%lf")
void AppendFixed3(std::string* s, double v);  // printf("%.3f")

// Writes one `<host>-pid<pid>.log` per process. Records are held per process until the simulated
// dump pass that writes them is over, then formatted straight into a shared arena (one chunk per
// process and pass batch). When the arena is full it is handed to a background thread, which
// groups the chunks by process and appends them to their files (one file open at a time, whatever
// the process count), while formatting continues into a second arena. Memory: two arenas.
class InspectorWriter {
 public:
  InspectorWriter(const SimConfig& config, const Layout& layout, const std::string& dir);
  ~InspectorWriter();
  // A completed collective as seen by `rank` (comm index, its op, per-op sequence number,
  // Inspector message size, own kernel start and completion, true time in us from job start).
  void AddColl(int rank, int comm, Op op, uint64_t sn, int64_t bytes, double start_us,
               double end_us, int channels);
  // A completed point-to-point operation (op kSend or kRecv); peer is the comm rank of the peer.
  // Returns its p2p_sn, or -1 when it is not recorded (2.29, p2p off, under the minimum size).
  int64_t AddP2p(int rank, int comm, Op op, int peer, int64_t bytes, double start_us,
                 double end_us);
  bool proxy() const { return proxy_; }
  // One network transfer's ProxyOp on `rank` (with `proxy()`): to or from `peer` (comm rank) for
  // the parent record `parent_sn` (a collective's coll_sn, or a p2p_sn when `parent_p2p`), from
  // `start_us` to `end_us` (true time). Send: `wire_us` on the wire, `wait_a_us` waiting for the
  // GPU to produce, `wait_b_us` for the receiver's credit. Recv: `wire_us` waiting for the data,
  // `wait_a_us` flushing, `wait_b_us` for the GPU to consume.
  struct ProxyTransfer {
    int peer;
    bool send, parent_p2p;
    uint64_t parent_sn;
    int64_t bytes;
    double start_us, end_us, wire_us, wait_a_us, wait_b_us;
  };
  void AddProxy(int rank, int comm, const ProxyTransfer& t);
  // An operation `rank` started at `start_us` that never completes (it waits on a member that
  // never arrives, or on a dead link): it stays in the plugin's in-flight list. Collectives give
  // their per-op `sn`; point-to-point ops (kSend/kRecv) their peer's comm rank. All its channels
  // started (the kernel runs, waiting on its peers) and none stopped.
  void AddInflight(int rank, int comm, Op op, uint64_t sn, int peer, int64_t bytes,
                   double start_us, int channels, const CollCost& cost);
  // Writes one <host>-pid<pid>.inflight.json per process, as collscope's plugin leaves it when
  // every communicator is finalized at `job_end_us` (the watchdog's abort of a hung job, or the
  // normal teardown): status "finalized", every communicator under finalized_comms with the ops
  // still in flight. An I/O error names the file it could not write.
  Status WriteStateFiles(double job_end_us) const;
  std::string StateFileName(int rank) const;
  // Every record `rank` adds from now on completes after `now_us`: write the finished passes.
  void Advance(int rank, double now_us);
  // End of job: the dump threads stop at `job_end_us` (no final drain, as in the plugin).
  Status Finish(double job_end_us);

  uint64_t coll_written() const { return coll_written_; }
  uint64_t p2p_written() const { return p2p_written_; }
  uint64_t dropped() const { return dropped_; }
  uint64_t filtered() const { return filtered_; }
  uint64_t bytes_written() const { return bytes_written_; }
  // Per process: file name and number of lines written.
  std::string FileName(int rank) const;
  uint64_t LinesOf(int rank) const { return procs_[rank].lines; }
  uint64_t LastSn(int rank, int comm, Op op) const;

 private:
  struct Pending {
    double end_us, start_us;
    double pass_us;  // when the dump pass that writes it runs
    int64_t bytes;
    int64_t pass;
    uint64_t sn;
    int32_t comm;
    int32_t peer;
    uint8_t op;
    uint8_t p2p;  // kColl, kP2p or kProxy: the order of a v4.4 batch
    uint16_t channels;
    // kProxy: `peer` and `sn` (the parent's) as above, `op` 1 for a send.
    uint8_t parent_p2p;
    float wire_us, wait_a_us, wait_b_us;
  };
  static constexpr uint8_t kColl = 0, kP2p = 1, kProxy = 2;
  struct Chunk {
    int32_t rank;
    uint32_t seq;
    size_t offset, len;
  };
  struct Arena {
    std::string data;
    std::vector<Chunk> chunks;
  };
  struct Proc {
    std::vector<Pending> pending;
    bool created = false;  // touched by the writer thread only
    double pass_offset_us = 0;
    uint64_t lines = 0;
    std::vector<uint64_t> p2p_sn;  // per comm kind
  };
  struct InflightOp {
    double start_us;
    int64_t bytes;
    uint64_t sn;
    int32_t peer;
    uint8_t op;
    uint8_t p2p;
    uint16_t channels;
    uint8_t algo, proto;
  };
  // Per (rank, comm kind): what the plugin's communicator counters would show.
  struct CommCounters {
    uint64_t completed = 0;
    uint64_t dropped_total[3] = {0, 0, 0};  // per Pending::p2p: what the v4.4 marker counts
    uint64_t proxy_op_sn = 0, proxy_record_sn = 0;
    double last_activity_us = 0;
    std::vector<InflightOp> inflight;
  };
  CommCounters& Counters(int rank, int comm);
  double PassTime(int rank, int64_t k) const;
  int64_t PassOf(int rank, double t_us) const;
  void Emit(int rank, std::vector<Pending>& ready);
  // A v4.0 line carries its header and metadata; a line of a v4.4 batch (`dump_ts` 0) does not.
  void FormatLine(int rank, const Pending& p, uint64_t dump_ts, std::string* out);
  void FormatMarker(int rank, int comm, uint64_t dump_ts, const uint64_t kept[3],
                    const uint64_t dropped[3], std::string* out);
  void FormatProxy(int rank, const Pending& p, std::string* out);
  const std::string& Prefix(int rank, int comm);  // header + metadata through dump_timestamp_us
  void Handoff();             // give the current arena to the writer thread
  void WriterLoop();
  void WriteArena(Arena& a);

  const SimConfig& config_;
  const Layout& layout_;
  std::string dir_;
  bool v229_;
  bool proxy_;
  std::vector<Proc> procs_;
  std::vector<std::string> comm_header_;  // per comm: {"header":{"id":"0x..",("comm_name":..,)
  std::vector<std::string> proc_meta_;    // per rank: ,"hostname":"..","pid":N},"
  std::vector<std::string> prefix_;       // per (rank, comm kind), built on first use
  size_t budget_ = 0;
  Arena arenas_[2];
  int cur_ = 0;
  std::thread writer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;  // busy_: the writer owns arenas_[1 - cur_]
  uint64_t coll_written_ = 0, p2p_written_ = 0, dropped_ = 0, filtered_ = 0, bytes_written_ = 0;
  std::string error_;
  std::vector<Pending> scratch_;
  std::vector<CommCounters> counters_;  // world x comm kinds
};

// Per-rank Kineto Chrome trace (small jobs), and beside it the kernel summaries collscope's CUPTI
// library would write for the same kernels (<host>-pid<pid>.kernels.jsonl.gz in `summary_dir`,
// docs/cupti.md, through the library's own Summarizer, one window per step). Events are collected
// in memory per rank.
class KinetoWriter {
 public:
  KinetoWriter(const SimConfig& config, const Layout& layout, const std::string& dir,
               const std::string& summary_dir);
  bool enabled() const { return enabled_; }
  bool summaries() const { return enabled_ && config_.output.kernel_summaries; }
  bool traces() const { return enabled_ && config_.output.kineto_traces; }
  bool StepOn(int step) const;
  void SetStep(int step) { step_ = step; }
  // GPU kernel on stream `stream` (true time, us from job start).
  void Kernel(int rank, const std::string& name, int stream, double start_us, double dur_us,
              const std::string& extra_args);
  // CPU user annotation (e.g. ProfilerStep#N, forward_step) and its GPU mirror.
  void Annotation(int rank, const std::string& name, double start_us, double dur_us, bool gpu);
  Status Finish();

 private:
  void Event(int rank, std::string_view cat, std::string_view name, int64_t pid, int64_t tid,
             double start_us, double dur_us, const std::string& args);
  const SimConfig& config_;
  const Layout& layout_;
  std::string dir_;
  bool enabled_ = false;
  double base_us_ = 0;
  std::vector<std::string> events_;
  std::vector<uint64_t> correlation_;
  std::string summary_dir_;
  std::vector<capture::Summarizer> summarizers_;  // per rank
  int step_ = 0;
};

// Per-process step/phase series in the annotation API's format (core/readers/step_file.h), one
// <host>-pid<pid>.steps.jsonl per rank, as collscope's annotation library leaves them: host wall
// clock (with the host's clock offset), every phase by its host wall time.
class StepWriter {
 public:
  StepWriter(const SimConfig& config, const Layout& layout, const std::string& dir);
  bool enabled() const { return enabled_; }
  // A phase's first start (true time, us from job start) and summed duration; NaN start: absent.
  struct Phase {
    const char* name;
    double start_us, dur_us;
  };
  void Step(int rank, int64_t step, double start_us, double dur_us, const std::vector<Phase>& phases);
  Status Finish();

 private:
  Status Flush(int rank);
  const SimConfig& config_;
  const Layout& layout_;
  std::string dir_;
  bool enabled_ = false;
  std::vector<std::string> pending_;  // per rank: lines not yet appended to its file
  std::vector<bool> started_;         // per rank: its file exists (and starts with its process line)
  Status error_;                      // why a flush failed (Finish reports it)
};

}  // namespace collscope::sim
