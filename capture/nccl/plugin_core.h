// Core of collscope's NCCL profiler plugin: per-communicator state, the hot-path event handlers,
// and the process-wide runtime (writer thread, output files).
//
// Contract (hot path = StartEvent/StopEvent/RecordEventState):
//   * no lock, no heap allocation, no system call (clock_gettime goes through the vDSO); all
//     memory a communicator needs is allocated in CommInit; rings that fill count drops.
//   * handles returned to NCCL point into the communicator's fixed pools; the first byte of every
//     handle object is a HandleKind so StopEvent/RecordEventState can dispatch without a lookup.
//   * an operation (Coll or P2p) completes when NCCL has stopped the op event (enqueued) and every
//     one of its nChannels KernelCh events has stopped; the thread whose decrement reaches zero
//     builds the CompletedRecord, pushes it into the ring and frees the slot.
//   * the writer thread only reads slots through relaxed atomics (generation-checked), so a
//     concurrently recycled slot can at worst be skipped in one state-file snapshot.
//   * nothing here throws: the ABI layer additionally wraps every entry point in try/catch.
#ifndef COLLSCOPE_CAPTURE_NCCL_PLUGIN_CORE_H_
#define COLLSCOPE_CAPTURE_NCCL_PLUGIN_CORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture/nccl/bounded_ring.h"
#include "capture/nccl/config.h"
#include "capture/nccl/profiler_abi.h"
#include "capture/nccl/prom_textfile.h"
#include "capture/nccl/record_format.h"

namespace collscope::capture {

enum class HandleKind : uint8_t { kOp = 1, kChannel = 2, kProxyOp = 3, kProxyStep = 4 };

struct HandleHeader {
  HandleKind kind;
};

struct OpSlot;
struct CommCtx;
class Runtime;

// One channel of one in-flight op. Written only by the thread delivering that channel's KernelCh
// events and read by the completing thread after the acq_rel decrement of OpSlot::pending.
//
// CPU timestamps cost a vDSO clock read each (~25 ns, most of the hot path), and GPU timers
// already time every channel, so outside verbose mode a channel reads the clock only when it
// needs to: the first channel to start (kernel_start_ts_us), the last to stop
// (kernel_stop_ts_us), and any channel lacking a GPU timer (kernel_cpu fallback). 0 = not read.
struct alignas(64) ChannelRec {
  HandleHeader hdr{HandleKind::kChannel};
  uint8_t id = 0;
  bool tracked = false;   // false for the shared overflow record (channel id >= kMaxChannels)
  bool recorded = false;  // a KernelChStop state arrived
  uint32_t start_sn = 0;  // verbose only, like the other *_sn
  OpSlot* op = nullptr;
  uint64_t gpu_start = 0, gpu_stop = 0;
  uint64_t cpu_start_ns = 0, cpu_stop_ns = 0, cpu_record_ns = 0;
  uint32_t stop_sn = 0, record_sn = 0;
};
// One cache line per channel keeps a slot at ~4 KiB (the in-flight pool is slots x 4 KiB).
static_assert(sizeof(ChannelRec) == 64);

enum SlotState : uint32_t { kSlotFree = 0, kSlotClaimed = 1, kSlotBusy = 2 };

struct OpSlot {
  HandleHeader hdr{HandleKind::kOp};
  uint32_t index = 0;
  CommCtx* comm = nullptr;
  std::atomic<uint32_t> state{kSlotFree};
  std::atomic<uint32_t> gen{0};
  // Fields the state-file writer reads concurrently: relaxed atomics.
  std::atomic<uint8_t> is_p2p{0};
  std::atomic<uint8_t> func{0};
  std::atomic<uint8_t> n_channels{0};
  std::atomic<int32_t> peer{-1};
  std::atomic<uint64_t> sn{0};
  std::atomic<uint64_t> msg_bytes{0};
  std::atomic<uint64_t> user_tag{0};
  std::atomic<int64_t> step{-1};         // annotation library: -1 when absent
  std::atomic<int32_t> micro_batch{-1};
  std::atomic<uint64_t> phase[2] = {0, 0};
  std::atomic<uint64_t> start_ns{0};
  std::atomic<uint64_t> enqueue_ns{0};  // 0 until NCCL stops the op event
  std::atomic<uint64_t> algo[2] = {0, 0};
  std::atomic<uint64_t> proto[2] = {0, 0};
  std::atomic<uint64_t> ch_started{0};         // bit c: KernelCh c started
  std::atomic<uint64_t> ch_stopped{0};         // bit c: KernelCh c stop observed (record or stop)
  std::atomic<uint64_t> first_ch_start_ns{0};  // CPU time of the first channel start
  // Completion: 1 (op event) + nChannels (KernelCh stops) outstanding.
  std::atomic<int32_t> pending{0};
  std::atomic<uint32_t> event_sn{0};  // verbose: per-op callback counter
  uint32_t start_sn = 0, stop_sn = 0;
  ChannelRec ch[kMaxChannels + 1];  // last entry absorbs out-of-range channel ids
};

// Progress of one ProxyOp (only with COLLSCOPE_PROXY_EVENTS=1). ProxyStep handles point at
// `step`, whose owner is this entry.
struct ProxyEntry {
  HandleHeader hdr{HandleKind::kProxyOp};
  struct StepHandle {
    HandleHeader hdr{HandleKind::kProxyStep};
    ProxyEntry* owner = nullptr;
  } step;
  CommCtx* comm = nullptr;
  std::atomic<uint32_t> state{kSlotFree};
  std::atomic<uint32_t> gen{0};
  std::atomic<int32_t> op_index{-1};
  std::atomic<uint32_t> op_gen{0};
  std::atomic<int32_t> channel{0};
  std::atomic<int32_t> peer{-1};
  std::atomic<int32_t> n_steps{0};
  std::atomic<int32_t> is_send{0};
  std::atomic<int32_t> steps_started{0};  // highest step index started + 1
  std::atomic<int32_t> steps_done{0};     // ProxyStep events stopped
  std::atomic<int32_t> last_state{-1};    // last ProxyOp/ProxyStep state recorded
  std::atomic<uint64_t> trans_bytes{0};   // last transSize reported by a ProxyStep state
  std::atomic<uint64_t> last_update_ns{0};
};

// Per-communicator context returned to NCCL by init.
struct CommCtx {
  CommCtx(Runtime* rt, CommIdentity ident, const Config& cfg, bool active);
  CommCtx(const CommCtx&) = delete;
  CommCtx& operator=(const CommCtx&) = delete;

  Runtime* const rt;
  const CommIdentity ident;
  const bool active;  // false when the runtime was disabled at init: every event is ignored
  const bool verbose;
  const bool proxy_events;
  const uint64_t min_size_bytes;
  const uint32_t sample_every;

  // The annotation library's collscope_annotate_current, when it is in the process (looked up at
  // each init: Python may load it after NCCL started): each op then carries the step, phase and
  // micro-batch it was issued in.
  using AnnotateCurrentFn = int (*)(int64_t* step, char* phase, int32_t phase_size, int32_t* micro_batch);
  AnnotateCurrentFn annotate_current = nullptr;

  const uint32_t pool_size;
  std::unique_ptr<OpSlot[]> slots;
  std::atomic<uint32_t> alloc_cursor{0};

  const uint32_t proxy_pool_size;
  std::unique_ptr<ProxyEntry[]> proxies;
  std::atomic<uint32_t> proxy_cursor{0};

  std::unique_ptr<BoundedRing<CompletedRecord>> coll_ring;
  std::unique_ptr<BoundedRing<CompletedRecord>> p2p_ring;
  std::unique_ptr<ChannelTrace[]> coll_traces;  // verbose: capacity * kMaxChannels
  std::unique_ptr<ChannelTrace[]> p2p_traces;

  std::atomic<uint64_t> p2p_sn{0};
  std::atomic<uint64_t> coll_dropped{0};  // ring full or no free in-flight slot
  std::atomic<uint64_t> p2p_dropped{0};
  std::atomic<uint64_t> untracked{0};  // ops not tracked at all (no free slot)
  std::atomic<uint64_t> proxy_untracked{0};
  std::atomic<uint64_t> ops_started{0};
  std::atomic<uint64_t> ops_completed{0};
  std::atomic<uint64_t> sample_counter{0};
  std::atomic<uint64_t> sampled_out{0};
  std::atomic<uint64_t> below_min_size{0};
  std::atomic<uint64_t> last_activity_ns{0};

  // Writer-side bookkeeping (guarded by Runtime::mu_).
  uint64_t coll_dropped_reported = 0;
  uint64_t p2p_dropped_reported = 0;
  uint32_t prom_group = 0;  // PromTextfile::CommGroup, when the textfile is on
};

// Hot path. All return nullptr when the event is not tracked; every entry point accepts nullptr.
// `user_tag`: ABI v7's userTag (ncclCollConfig_t::userProfilerTag), 0 when untagged or older ABIs.
void* StartOp(CommCtx* comm, bool is_p2p, const collscope_coll_v4_t* coll,
              const collscope_p2p_v4_t* p2p, uint64_t user_tag = 0) noexcept;
void* StartKernelCh(CommCtx* comm, void* parent, uint8_t channel_id, uint64_t ptimer) noexcept;
void* StartProxyOp(CommCtx* comm, void* parent, const collscope_proxyOp_t* d) noexcept;
void* StartProxyStep(void* parent, int step) noexcept;
void StopEvent(void* handle) noexcept;
void RecordEventState(void* handle, int state,
                      const collscope_ncclProfilerEventStateArgs_t* args) noexcept;

// Wall-clock nanoseconds (CLOCK_REALTIME through the vDSO).
uint64_t NowNs() noexcept;

// Process-wide runtime: configuration, identity, output files and the writer thread. Created by
// the first CommInit, destroyed by the last CommFinalize (so NCCL may dlclose the plugin).
class Runtime {
 public:
  // init for any ABI version. Never throws; on any failure it returns success with mask 0.
  static collscope_ncclResult_t CommInit(void** context, uint64_t comm_id, int* mask,
                                         const char* comm_name, int nnodes, int nranks, int rank,
                                         collscope_ncclDebugLogger_t logfn) noexcept;
  static collscope_ncclResult_t CommFinalize(void* context) noexcept;

  bool disabled() const { return disabled_.load(std::memory_order_relaxed); }
  uint32_t pid() const { return proc_.pid; }

  // Process-exit hook: stops the writer and flushes everything without freeing memory (NCCL
  // threads may still be running).
  static void AtExit() noexcept;

 private:
  Runtime() = default;
  bool Setup(collscope_ncclDebugLogger_t logfn);  // false: disabled (warned)
  void SetupProm();  // the optional Prometheus textfile (warns and stays off on failure)
  void StartWriter();
  void StopWriter();
  void WriterLoop();
  // The *Locked functions require mu_.
  double MaxRingFillLocked() const;  // the fullest ring's share of its capacity
  size_t DumpPassLocked();
  // Formats and writes what the communicator's rings hold (at most a ring's worth each): its
  // dump_stats line, then its records. Returns the records drained.
  size_t DrainCommLocked(CommCtx* c);
  bool FlushLocked(std::string* text);  // writes and clears it; false (disabled) on failure
  // status: "running", "finalized" (last communicator gone) or "exiting" (process exit).
  void WriteStateLocked(const char* status);
  // Prometheus textfile (only when prom_ is set): drains the rings, then replaces the file.
  void WritePromLocked();
  void RemovePromLocked();  // teardown: the file goes away with the process, as Inspector's
  bool WriteAll(int fd, const std::string& data);
  void Disable(const std::string& why);
  void Log(collscope_ncclDebugLogLevel level, const std::string& msg);

  Config cfg_;
  ProcessIdentity proc_;
  collscope_ncclDebugLogger_t logfn_ = nullptr;
  std::atomic<bool> disabled_{false};
  int refs_ = 0;  // guarded by the global mutex

  std::mutex mu_;
  std::string records_buf_;  // the writer's formatting buffer, reused across passes (under mu_)
  std::condition_variable cv_;
  bool stop_ = false;
  bool writer_running_ = false;
  std::thread writer_;
  std::vector<CommCtx*> comms_;
  int log_fd_ = -1;
  std::string log_path_, state_path_, state_tmp_path_;
  uint64_t state_seq_ = 0;
  std::string buf_;  // reused formatting buffer (a dump_stats line)
  // Prometheus textfile output; null when off or after a write error (warned once).
  std::unique_ptr<PromTextfile> prom_;
  std::string prom_path_, prom_tmp_path_;
  // Finalized communicators that still had operations in flight (typically ncclCommAbort after
  // a hang); kept in every later state file so the evidence outlives the communicator.
  std::vector<std::string> finalized_snapshots_;
};

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_NCCL_PLUGIN_CORE_H_
