// A columnar batch of parsed lines from one file, the unit handed from parser threads to the
// store's single writer. Communicators and processes are numbered locally (per batch); the writer
// maps them to the store's ids, so parser threads never share a dictionary.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/inspector_record.h"

namespace collscope {

struct CommKey {
  uint64_t hash = 0;
  int32_t n_ranks = 0, nnodes = 0;
  bool has_name = false;
  std::string name;
  std::string hash_text;  // as written, e.g. "0x7f8c496ae9f661"
  bool operator==(const CommKey& o) const {
    return hash == o.hash && n_ranks == o.n_ranks && nnodes == o.nnodes &&
           has_name == o.has_name && name == o.name;
  }
};

struct ProcessKey {
  std::string hostname;
  uint64_t pid = 0;
  std::string git_rev, rec_mechanism, format_version;  // first seen; not part of identity
  bool operator==(const ProcessKey& o) const { return pid == o.pid && hostname == o.hostname; }
};

// The shape of an operation: records of the same communicator, op and size share one.
struct OpKey {
  uint32_t comm = 0;  // local (batch) or store communicator id
  uint8_t kind = 0, op = 0, algo = kNullEnum, proto = kNullEnum;
  int32_t peer = kNullI32;
  uint64_t msg_size_bytes = 0;
  bool operator==(const OpKey& o) const {
    return comm == o.comm && kind == o.kind && op == o.op && algo == o.algo &&
           proto == o.proto && peer == o.peer && msg_size_bytes == o.msg_size_bytes;
  }
};
struct OpKeyHash {
  size_t operator()(const OpKey& k) const {
    uint64_t h = k.msg_size_bytes * 0x9e3779b97f4a7c15ull;
    h ^= (uint64_t{k.comm} << 32 | uint64_t{k.kind} << 24 | uint64_t{k.op} << 16 |
          uint64_t{k.algo} << 8 | k.proto) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint32_t>(k.peer) * 0xff51afd7ed558ccdull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

struct Rejection {
  uint64_t line = 0;
  std::string reason;
  std::string excerpt;
  // Not a rejected line but records known to be lost before `line` (a v4.3/v4.4 batch cut short).
  uint64_t missing_records = 0;
};

struct RecordBatch {
  size_t file_index = 0;   // index into the ingest's file list
  uint64_t end_offset = 0;  // file offset just past the last line in this batch
  uint64_t end_line = 0;    // lines consumed in the file after this batch
  bool last = false;        // no more batches follow for this file in this ingest
  uint64_t bytes = 0;       // input bytes covered by this batch (for progress)
  uint64_t incomplete_tail = 0;  // with `last`: bytes of an unfinished last line left unread
  uint64_t timing_source_missing = 0;  // records stored without coll_timing_source

  std::vector<CommKey> comms;
  std::vector<ProcessKey> processes;
  std::vector<OpKey> ops;  // OpKey::comm is an index into comms

  // records, one entry per row, in the store's column order
  std::vector<uint64_t> line;
  std::vector<uint32_t> process_local, op_local;
  std::vector<int32_t> rank;
  std::vector<uint64_t> sn, exec_time_us;
  std::vector<uint8_t> timing_source;
  // Written bandwidths; `bw_derived` is true when both equal Inspector's formula (not stored).
  std::vector<double> algbw_gbs, busbw_gbs;
  std::vector<uint8_t> algbw_derived, busbw_derived;
  std::vector<uint64_t> dump_ts_us, start_ts_us, stop_ts_us;
  std::vector<int32_t> n_channels, global_rank, local_rank, gpu;
  std::vector<uint64_t> enqueue_ts_us, kernel_start_ts_us, kernel_stop_ts_us;
  std::vector<double> queue_delay_us, ch_start_spread_us, ch_stop_spread_us;
  // Records that carry the annotation library's step/phase/micro-batch or a v7 user tag (a few
  // in most files, none in stock Inspector logs): stored beside the records, by line.
  struct Annotation {
    uint64_t line;
    int64_t step;  // -1: absent
    std::string phase;
    int32_t micro_batch;  // kNullI32: absent
    bool has_user_tag;
    uint64_t user_tag;
  };
  std::vector<Annotation> annotations;

  // kernel_events
  std::vector<uint64_t> ke_line;
  std::vector<KernelEvent> ke;

  // dump_stats
  struct DumpStatsRow {
    uint64_t line;
    uint32_t process_local, comm_local;
    int32_t rank;
    uint64_t dump_ts_us;
    uint64_t coll_records, coll_dropped_total, coll_dropped_since_last_dump;
    uint64_t p2p_records, p2p_dropped_total, p2p_dropped_since_last_dump;
    uint64_t proxy_records, proxy_dropped_total, proxy_dropped_since_last_dump;  // kNullU64: absent
  };
  std::vector<DumpStatsRow> dump_stats;

  // proxy_ops: the op-level proxy_trace records (proxy_op_start, proxy_op_segment, proxy_op)
  struct ProxyOpRow {
    uint64_t line;
    uint32_t process_local, comm_local;
    uint64_t dump_ts_us;
    ProxyRecord op;
  };
  std::vector<ProxyOpRow> proxy_ops;
  // proxy_steps: each nested step, with its parent record's fields, and each flat proxy_step
  struct ProxyStepRow {
    uint64_t line;
    uint32_t process_local, comm_local;
    int32_t rank;
    uint8_t parent_type, direction;
    int32_t channel_id, peer;
    uint64_t proxy_op_sn, parent_sn, dump_ts_us;
    ProxyStep step;
  };
  std::vector<ProxyStepRow> proxy_steps;

  std::vector<Rejection> rejections;

  size_t records() const { return line.size(); }
  // Every row of every table the batch holds: what bounds a batch's size.
  size_t rows() const {
    return records() + dump_stats.size() + proxy_ops.size() + proxy_steps.size() +
           rejections.size();
  }
  // Empties the batch, keeping the vectors' capacity.
  void Clear();
  // Orders records by (communicator, kind, op), keeping line order within each: consecutive rows
  // then carry consecutive sequence numbers and one rank, which the store compresses to almost
  // nothing. Row order has no meaning in the store (`line` keeps the file order).
  void SortByStream();
  // Appends one parsed line; keys are interned into the local dictionaries.
  void Add(uint64_t line_no, const ParsedLine& p);

 private:
  uint32_t InternComm(const ParsedLine& p);
  uint32_t InternProcess(const ParsedLine& p);
  uint32_t InternOp(const OpKey& k);
  std::unordered_map<OpKey, uint32_t, OpKeyHash> op_index_;
  std::vector<uint32_t> perm_;
  std::vector<uint64_t> scratch_;
};

}  // namespace collscope
