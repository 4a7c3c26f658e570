// Pure computations and JSON formatting for collscope's NCCL profiler plugin.
//
// Contract: nothing here allocates on the hot path except the Format* functions, which append to
// a caller-owned std::string and run only on the writer thread. The JSON produced is NCCL
// Inspector format v4.0 (key names and order as in Inspector's JSON mode) plus one extra
// top-level key "collscope" (schema in docs/capture.md). Doubles print like printf("%lf")
// (6 decimals); NaN prints as the string "nan" (as Inspector does), infinities as "inf"/"-inf".
#ifndef COLLSCOPE_CAPTURE_NCCL_RECORD_FORMAT_H_
#define COLLSCOPE_CAPTURE_NCCL_RECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace collscope::capture {

// Channels tracked individually; NCCL's MAXCHANNELS is 64. Events for higher channel ids are
// still counted (so completion works) but carry no per-channel timing.
inline constexpr int kMaxChannels = 64;

// NCCL function names as the core reports them. The JSON prints NCCL's own string for every known
// value and "Invalid" for a null or unknown one (Inspector's spelling).
enum class Func : uint8_t {
  kInvalid = 0,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kSend,
  kRecv,
  kSendRecv,
  kAlltoAll,
  kGather,
  kScatter,
  kAllGatherV,
  kPutSignal,
  kSignal,
  kWaitSignal,
};

Func ParseFunc(const char* name) noexcept;
std::string_view FuncName(Func f) noexcept;

// Bytes per element for NCCL's datatype strings ("ncclFloat32", ...); 0 if unknown or null.
size_t DatatypeSize(const char* name) noexcept;

enum class TimingSource : uint8_t { kKernelGpu = 0, kKernelCpu = 1, kCollectiveCpu = 2 };
std::string_view TimingSourceName(TimingSource s) noexcept;

// Up to 15 characters of an NCCL algo/proto string packed into two words, so the writer thread
// can read it with relaxed atomics while the hot path reuses the slot (no torn-string races).
struct PackedName {
  uint64_t w[2] = {0, 0};
};
PackedName PackName(const char* s) noexcept;
// Writes the unpacked name to out (16 bytes); "unknown" when empty.
std::string_view UnpackName(const PackedName& p, char (&out)[16]) noexcept;

struct Bandwidth {
  double algbw_gbs = 0;
  double busbw_gbs = 0;
};
// Inspector's formulas (reference §1.3): t = exec_us / 1e6; algbw = traffic / 1e9 / t;
// busbw = algbw * factor. exec_us == 0 or an op without a formula gives 0.
Bandwidth ComputeBandwidth(Func f, bool is_p2p, uint64_t msg_bytes, uint64_t exec_us,
                           int nranks) noexcept;

// What the hot path observed for one channel of one operation.
struct ChannelTiming {
  uint8_t channel_id = 0;
  uint64_t gpu_start = 0;     // GPU globaltimer ns at channel start (0 = unknown)
  uint64_t gpu_stop = 0;      // GPU globaltimer ns at channel stop (0 = unknown)
  uint64_t cpu_start_ns = 0;  // wall ns when the KernelCh event started
  uint64_t cpu_stop_ns = 0;   // wall ns when the channel stop was observed (record or stop)
};

struct ExecTiming {
  uint64_t exec_us = 0;
  TimingSource source = TimingSource::kCollectiveCpu;
  uint64_t kernel_start_ns = 0;  // earliest CPU-observed channel start, 0 if none
  uint64_t kernel_stop_ns = 0;   // latest CPU-observed channel stop, 0 if none
  double ch_start_spread_us = 0;
  double ch_stop_spread_us = 0;
};

// Execution time = max over channels of the per-channel time, preferring GPU timers
// (kernel_gpu), then channel CPU timestamps (kernel_cpu), then op_start..op_complete
// (collective_cpu). Per-channel times are truncated to whole microseconds.
ExecTiming ComputeExecTiming(std::span<const ChannelTiming> channels, uint64_t op_start_ns,
                             uint64_t op_complete_ns) noexcept;

// Per-channel callback trace kept only in verbose mode (Inspector's event_trace_*).
struct ChannelTrace {
  uint8_t channel_id = 0;
  uint32_t start_sn = 0, stop_sn = 0, record_sn = 0;
  uint64_t start_ns = 0, stop_ns = 0, record_ns = 0;
};

// One completed operation, copied by the hot path into a ring, formatted by the writer.
struct CompletedRecord {
  bool is_p2p = false;
  Func func = Func::kInvalid;
  TimingSource source = TimingSource::kCollectiveCpu;
  uint8_t n_channels = 0;
  uint8_t n_traces = 0;  // verbose: ChannelTrace entries stored beside this record
  int32_t peer = -1;
  uint64_t sn = 0;
  uint64_t msg_bytes = 0;
  uint64_t user_tag = 0;  // ABI v7 userTag; 0 = untagged (not written)
  int64_t step = -1;      // annotation library's step when issued; -1: none (not written)
  int32_t micro_batch = -1;
  PackedName phase;       // innermost annotated phase, "" when none
  uint64_t exec_us = 0;
  uint64_t start_ns = 0;
  uint64_t enqueue_ns = 0;
  uint64_t kernel_start_ns = 0;
  uint64_t kernel_stop_ns = 0;
  double ch_start_spread_us = 0;
  double ch_stop_spread_us = 0;
  PackedName algo, proto;
  uint32_t start_sn = 0, stop_sn = 0;  // verbose: callback counters of the op's own events
};

// Identity of the communicator, fixed at init.
struct CommIdentity {
  uint64_t comm_id = 0;
  std::string comm_name;  // "unknown" when NCCL gave none
  int rank = 0;
  int nranks = 0;
  int nnodes = 0;
};

// Identity of the process, fixed at the first init.
struct ProcessIdentity {
  std::string hostname;
  uint32_t pid = 0;
  int global_rank = -1;
  int local_rank = -1;
  int gpu = -1;
  std::string git_rev;
};

// Appends one JSON line (with trailing '\n') for a completed record. traces may be empty.
void FormatRecord(const CommIdentity& comm, const ProcessIdentity& proc, const CompletedRecord& r,
                  std::span<const ChannelTrace> traces, bool verbose, uint64_t dump_ts_us,
                  std::string* out);
// The same with the header and metadata formatted once per communicator and dump pass
// (RecordHead): the writer's cost per record is then the record's own fields.
std::string RecordHead(const CommIdentity& comm, const ProcessIdentity& proc, uint64_t dump_ts_us);
void FormatRecord(std::string_view head, const CommIdentity& comm, const ProcessIdentity& proc,
                  const CompletedRecord& r, std::span<const ChannelTrace> traces, bool verbose,
                  std::string* out);

struct DumpStats {
  uint64_t coll_records = 0, coll_dropped_total = 0, coll_dropped_since_last = 0;
  uint64_t p2p_records = 0, p2p_dropped_total = 0, p2p_dropped_since_last = 0;
};
// Appends a v4.1-style dump_stats line.
void FormatDumpStats(const CommIdentity& comm, const ProcessIdentity& proc, const DumpStats& s,
                     uint64_t dump_ts_us, std::string* out);

// Small JSON writing helpers shared with the state-file writer.
void AppendJsonString(std::string_view s, std::string* out);
void AppendUint(uint64_t v, std::string* out);
void AppendInt(int64_t v, std::string* out);
void AppendDouble(double v, std::string* out);   // %lf style; "nan"/"inf" as strings
void AppendHexId(uint64_t v, std::string* out);  // "0x%lx", quoted

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_NCCL_RECORD_FORMAT_H_
