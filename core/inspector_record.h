// One parsed line of NCCL Inspector output (formats v4.0, v4.1 dump_stats, v4.2 algo/proto,
// 2.30+ p2p_perf and comm_name, verbose event traces, collscope plugin extras).
// String views point into the parser's buffers: consume a ParsedLine before parsing the next.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

namespace collscope {

// Sentinels for "absent" in fixed-width columns; the store writes them as NULL.
inline constexpr uint64_t kNullU64 = std::numeric_limits<uint64_t>::max();
inline constexpr int32_t kNullI32 = std::numeric_limits<int32_t>::min();
inline constexpr uint8_t kNullEnum = 255;
inline constexpr double kNullDouble = std::numeric_limits<double>::quiet_NaN();

// Enum codes are indexes into the value lists of taxonomy.cc (coll_kind, coll_op, ...).
enum class RecordKind : uint8_t { kColl = 0, kP2p = 1 };
enum class CollType : uint8_t { kSingleRank = 0, kNvlinkOnly = 1, kNicOnly = 2, kMixed = 3 };

// single-rank when n_ranks=1, nvlink-only when nnodes=1, nic-only when n_ranks=nnodes, else mixed.
CollType DeriveCollType(int32_t n_ranks, int32_t nnodes);
std::string_view CollTypeName(CollType type);

// Index of `value` in the named taxonomy enum, or -1.
int EnumCode(std::string_view enum_name, std::string_view value);

struct KernelEvent {
  int32_t channel_id = kNullI32;
  uint64_t start_sn = kNullU64, stop_sn = kNullU64, record_sn = kNullU64;
  uint64_t start_ts_us = kNullU64, stop_ts_us = kNullU64, record_ts_us = kNullU64;
};

// Codes of a proxy_trace record's string fields, indexes into these names (stored as VARCHAR).
inline constexpr std::string_view kProxyRecordTypes[] = {"proxy_op", "proxy_step", "proxy_op_start",
                                                         "proxy_op_segment"};
enum class ProxyRecordType : uint8_t { kOp = 0, kStep = 1, kOpStart = 2, kOpSegment = 3 };
inline constexpr std::string_view kProxyParentTypes[] = {"coll", "p2p", "unknown"};
inline constexpr std::string_view kProxyDirections[] = {"send", "recv"};

// One ProxyStep: an element of a proxy_op / proxy_op_segment record's steps[], or a flat
// proxy_step record. Durations are the writer's, in microseconds; absent ones are NaN.
struct ProxyStep {
  uint64_t proxy_step_sn = kNullU64, trans_size_bytes = kNullU64, stop_ts_us = kNullU64;
  int32_t step = kNullI32;
  double total_us = kNullDouble, gpu_produce_us = kNullDouble, peer_credit_us = kNullDouble,
         wire_us = kNullDouble, flush_us = kNullDouble, gpu_consume_us = kNullDouble;
};

// A v4.3/v4.4 proxy_trace record but its steps. Absent fields hold the kNull* sentinels.
struct ProxyRecord {
  ProxyRecordType record_type = ProxyRecordType::kOp;
  uint8_t parent_type = kNullEnum, direction = kNullEnum;
  // The record's own rank (v4.4 final proxy_op, v4.3 flat records), else the marker's
  // header.rank: the parser resolves it.
  int32_t rank = kNullI32;
  int32_t channel_id = kNullI32, peer = kNullI32;
  uint64_t record_sn = kNullU64, parent_sn = kNullU64, proxy_op_sn = kNullU64;
  uint64_t n_steps = kNullU64, chunk_size_bytes = kNullU64, n_steps_completed = kNullU64,
           n_steps_dropped = kNullU64, trans_size_bytes = kNullU64;
  double total_us = kNullDouble;
  uint64_t start_ts_us = kNullU64, stop_ts_us = kNullU64;  // proxy_op_start_ts, proxy_op_stop_ts
};

struct ParsedLine {
  // kProxy: a v4.3/v4.4 proxy_trace record, in `proxy`.
  enum class Kind { kRecord, kDumpStats, kProxy };
  Kind kind = Kind::kRecord;

  // header
  uint64_t comm_hash = 0;
  std::string_view comm_hash_text;
  std::string_view comm_name;  // empty when absent
  bool has_comm_name = false;
  int32_t rank = 0, n_ranks = 0, nnodes = 0;
  // metadata
  std::string_view format_version, git_rev, rec_mechanism, hostname;
  uint64_t dump_ts_us = 0, pid = 0;
  // coll_perf / p2p_perf
  RecordKind record_kind = RecordKind::kColl;
  uint8_t op = 0, timing_source = 0, algo = kNullEnum, proto = kNullEnum;
  uint64_t sn = 0, msg_size_bytes = 0, exec_time_us = 0;
  int32_t peer = kNullI32;
  double algbw_gbs = kNullDouble, busbw_gbs = kNullDouble;
  uint64_t start_ts_us = kNullU64, stop_ts_us = kNullU64;
  int32_t n_channels = kNullI32;
  std::vector<KernelEvent> kernel_events;
  // collscope plugin extras
  int32_t global_rank = kNullI32, local_rank = kNullI32, gpu = kNullI32;
  uint64_t enqueue_ts_us = kNullU64, kernel_start_ts_us = kNullU64, kernel_stop_ts_us = kNullU64;
  double queue_delay_us = kNullDouble, ch_start_spread_us = kNullDouble,
         ch_stop_spread_us = kNullDouble;
  // The annotation library's step, phase and micro-batch when the plugin saw the operation start
  // (collscope.step/phase/micro_batch), and ABI v7's user tag (coll_user_tag / p2p_user_tag).
  bool annotated = false;  // any of the four is present
  int64_t step = -1;
  std::string_view phase;
  int32_t micro_batch = kNullI32;
  bool has_user_tag = false;  // every uint64 is a tag (NCCL reserves those with the top bit set)
  uint64_t user_tag = 0;
  // dump_stats (v4.1)
  uint64_t coll_records = 0, coll_dropped_total = 0, coll_dropped_since_last_dump = 0;
  uint64_t p2p_records = 0, p2p_dropped_total = 0, p2p_dropped_since_last_dump = 0;
  uint64_t proxy_records = 0;  // v4.3/v4.4 markers; 0 when absent, as the marker protocol reads it
  bool has_proxy_records = false;
  uint64_t proxy_dropped_total = kNullU64, proxy_dropped_since_last_dump = kNullU64;
  // proxy_trace: the record, and its nested steps[] or the one step a flat proxy_step is
  ProxyRecord proxy;
  std::vector<ProxyStep> proxy_steps;
  // What the line says about the stream rather than about an operation:
  bool timing_source_missing = false;  // v4.0 as in NVIDIA's README example; stored as NULL
  // Lines the previous v4.3/v4.4 marker announced that never came (the file was cut, split or
  // merged mid-batch), noticed on this line.
  uint64_t batch_lines_missing = 0;
};

}  // namespace collscope
