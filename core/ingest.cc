#include "core/ingest.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/input_files.h"
#include "core/inspector_parser.h"
#include "core/line_reader.h"
#include "core/record_batch.h"
#include "core/taxonomy.h"

namespace collscope {

bool IsInspectorLogName(const std::string& name) {
  for (const char* suffix : {".log", ".jsonl", ".log.gz", ".jsonl.gz"}) {
    size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kFingerprintBytes = 4096;
constexpr size_t kBatchRows = 1 << 16;


// DuckDB VARCHARs must be UTF-8: keep printable ASCII, replace the rest.
std::string Printable(const char* p, size_t n, size_t max) {
  std::string out;
  out.reserve(std::min(n, max));
  for (size_t i = 0; i < n && out.size() < max; ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out;
}

struct FileTask {
  std::string path;
  int32_t file_id = 0;
  uint64_t start_offset = 0, start_line = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool compressed = false;
  // Hash of the first kFingerprintBytes, once that much has been consumed: it cannot change
  // afterwards, so later commits need not read the file again.
  bool fingerprint_final = false;
  uint64_t fingerprint = 0;
};

struct FileProgress {
  uint64_t bytes_consumed = 0, lines_consumed = 0;
  bool touched = false;
};

// Bounded multi-producer, single-consumer queue of batches.
class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(capacity) {}
  bool Push(std::unique_ptr<RecordBatch> b) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return q_.size() < capacity_ || cancelled_; });
    if (cancelled_) return false;
    q_.push_back(std::move(b));
    not_empty_.notify_one();
    return true;
  }
  // Returns null when every producer is done and the queue is empty.
  std::unique_ptr<RecordBatch> Pop() {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return !q_.empty() || producers_ == 0; });
    if (q_.empty()) return nullptr;
    auto b = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return b;
  }
  // Batches are recycled so their column vectors keep their capacity across files.
  std::unique_ptr<RecordBatch> Take() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!free_.empty()) {
        auto b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    return std::make_unique<RecordBatch>();
  }
  void Recycle(std::unique_ptr<RecordBatch> b) {
    b->Clear();
    std::lock_guard<std::mutex> l(mu_);
    free_.push_back(std::move(b));
  }
  void SetProducers(int n) { producers_ = n; }
  void ProducerDone() {
    std::lock_guard<std::mutex> l(mu_);
    --producers_;
    not_empty_.notify_all();
  }
  void Cancel() {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_ = true;
    not_full_.notify_all();
  }
  bool cancelled() {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_;
  }

 private:
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::unique_ptr<RecordBatch>> q_;
  std::vector<std::unique_ptr<RecordBatch>> free_;
  size_t capacity_;
  int producers_ = 0;
  bool cancelled_ = false;
};

// Parses one file from its start offset, pushing batches of at most kBatchRows lines.
struct ParseContext {
  explicit ParseContext(size_t block_size) : reader(block_size) {}
  LineReader reader;
  InspectorLineParser parser;
  ParsedLine parsed;
  std::string reason;
};

std::string MissingBatchLines(uint64_t n, const char* where) {
  return "batch: " + std::to_string(n) + " record line" + (n == 1 ? "" : "s") +
         " announced by the last marker (dump_stats) never came, " + where +
         " (the file was cut, split or merged mid-batch)";
}

void ParseFile(const FileTask& task, size_t file_index, ParseContext& ctx, BatchQueue& queue) {
  InspectorLineParser& parser = ctx.parser;
  ParsedLine& parsed = ctx.parsed;
  std::string& reason = ctx.reason;
  uint64_t line_no = task.start_line;
  auto batch = queue.Take();
  batch->file_index = file_index;
  uint64_t batch_start = task.start_offset;

  LineReader* reader = &ctx.reader;
  Status opened = reader->Open(task.path, task.start_offset);
  if (!opened.ok()) {
    batch->rejections.push_back({0, opened.message(), ""});
    batch->end_offset = task.start_offset;
    batch->end_line = line_no;
    batch->last = true;
    queue.Push(std::move(batch));
    return;
  }
  parser.StartFile();
  LineBlock block;
  for (;;) {
    Result<bool> more = reader->Next(&block);
    if (!more.ok()) {
      // Keep what was read; the rest of the file is retried by the next ingest.
      batch->rejections.push_back({line_no + 1, more.status().message(), ""});
      break;
    }
    if (!*more) break;
    if (block.overlong) {
      ++line_no;
      batch->rejections.push_back({line_no, "line: " + std::to_string(block.overlong) +
                                                " bytes, longer than the " +
                                                std::to_string(kMaxLineBytes >> 20) +
                                                " MiB limit; skipped", ""});
      continue;
    }
    const char* p = block.data;
    const char* end = block.data + block.size;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
      size_t len = nl - p;
      ++line_no;
      size_t readable = block.readable - (p - block.data);
      bool blank = std::all_of(p, nl, [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
      if (blank) {
        batch->rejections.push_back({line_no, "line: empty line", ""});
      } else if (parser.Parse(p, len, readable, &parsed, &reason)) {
        if (parsed.batch_lines_missing)
          batch->rejections.push_back({line_no, MissingBatchLines(parsed.batch_lines_missing, "before this line"), "", parsed.batch_lines_missing});
        batch->timing_source_missing += parsed.timing_source_missing;
        batch->Add(line_no, parsed);
      } else {
        batch->rejections.push_back({line_no, reason, Printable(p, len, 200)});
      }
      p = nl + 1;
      if (batch->rows() >= kBatchRows) {
        batch->end_offset = block.offset + (p - block.data);
        batch->end_line = line_no;
        batch->bytes = batch->end_offset - batch_start;
        batch_start = batch->end_offset;
        batch->SortByStream();
        if (!queue.Push(std::move(batch))) return;
        batch = queue.Take();
        batch->file_index = file_index;
      }
    }
  }
  if (uint64_t owed = parser.EndFile())
    batch->rejections.push_back({line_no, MissingBatchLines(owed, "at the end of the file"), "", owed});
  batch->end_offset = reader->consumed();
  batch->end_line = line_no;
  batch->bytes = batch->end_offset - batch_start;
  batch->last = true;
  batch->incomplete_tail = reader->pending();
  batch->SortByStream();
  queue.Push(std::move(batch));
}

std::string CommMapKey(const CommKey& c) {
  return std::to_string(c.hash) + "/" + std::to_string(c.n_ranks) + "/" +
         std::to_string(c.nnodes) + "/" + (c.has_name ? "1" + c.name : "0");
}
std::string ProcessMapKey(const std::string& host, uint64_t pid) {
  return host + "\n" + std::to_string(pid);
}

// Copies a column slice and marks sentinel values NULL (one validity fetch per slice).
template <typename T, typename IsNull>
void FillColumnIf(ChunkAppender& a, int col, const std::vector<T>& src, size_t off, size_t n,
                  IsNull is_null) {
  T* dst = a.Column<T>(col);
  std::memcpy(dst, src.data() + off, n * sizeof(T));
  uint64_t* validity = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (!is_null(src[off + i])) continue;
    if (!validity) validity = a.WritableValidity(col);
    validity[i >> 6] &= ~(uint64_t{1} << (i & 63));
  }
}

template <typename T>
void FillColumn(ChunkAppender& a, int col, const std::vector<T>& src, size_t off, size_t n,
                T null_value) {
  FillColumnIf(a, col, src, off, n, [null_value](T v) { return v == null_value; });
}

void FillDouble(ChunkAppender& a, int col, const std::vector<double>& src, size_t off, size_t n) {
  FillColumnIf(a, col, src, off, n, [](double v) { return std::isnan(v); });
}

// Bandwidths: NULL where derivable (see bandwidth.h); a written "nan" stays NaN.
void FillOverride(ChunkAppender& a, int col, const std::vector<double>& src,
                  const std::vector<uint8_t>& derived, size_t off, size_t n) {
  std::memcpy(a.Column<double>(col), src.data() + off, n * sizeof(double));
  uint64_t* validity = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (!derived[off + i]) continue;
    if (!validity) validity = a.WritableValidity(col);
    validity[i >> 6] &= ~(uint64_t{1} << (i & 63));
  }
}

// One value of a row, NULL where it holds the sentinel for "absent".
void SetU64(ChunkAppender& a, int col, size_t row, uint64_t v) {
  a.Column<uint64_t>(col)[row] = v;
  if (v == kNullU64) a.SetNull(col, row);
}
void SetI32(ChunkAppender& a, int col, size_t row, int32_t v) {
  a.Column<int32_t>(col)[row] = v;
  if (v == kNullI32) a.SetNull(col, row);
}
void SetDouble(ChunkAppender& a, int col, size_t row, double v) {
  a.Column<double>(col)[row] = v;
  if (std::isnan(v)) a.SetNull(col, row);
}
// A code of a proxy_trace string field as its name (VARCHAR), NULL for kNullEnum.
template <size_t N>
void SetName(ChunkAppender& a, int col, size_t row, const std::string_view (&names)[N],
             uint8_t code) {
  static const std::vector<std::string> text(std::begin(names), std::end(names));
  if (code < N)
    a.SetString(col, row, text[code]);
  else
    a.SetNull(col, row);
}

// The single writer: owns the connection's transaction, the dictionaries and the appenders.
class Writer {
 public:
  Writer(Store& store, int32_t run_id, int32_t ingest_id, std::vector<FileTask>& tasks)
      : store_(store), run_id_(run_id), ingest_id_(ingest_id), tasks_(tasks),
        progress_(tasks.size()) {}

  Status Init() {
    COLLSCOPE_RETURN_IF_ERROR(LoadDictionaries());
    duckdb_connection c = store_.connection();
    COLLSCOPE_RETURN_IF_ERROR(records_.Open(c, "records"));
    COLLSCOPE_RETURN_IF_ERROR(kernel_events_.Open(c, "kernel_events"));
    COLLSCOPE_RETURN_IF_ERROR(annotations_.Open(c, "record_annotations"));
    COLLSCOPE_RETURN_IF_ERROR(dump_stats_.Open(c, "dump_stats"));
    COLLSCOPE_RETURN_IF_ERROR(proxy_ops_.Open(c, "proxy_ops"));
    COLLSCOPE_RETURN_IF_ERROR(proxy_steps_.Open(c, "proxy_steps"));
    COLLSCOPE_RETURN_IF_ERROR(comms_.Open(c, "communicators"));
    COLLSCOPE_RETURN_IF_ERROR(operations_.Open(c, "operations"));
    COLLSCOPE_RETURN_IF_ERROR(processes_.Open(c, "processes"));
    COLLSCOPE_RETURN_IF_ERROR(log_.Open(c, "ingest_log"));
    for (size_t i = 0; i < tasks_.size(); ++i) {
      progress_[i].bytes_consumed = tasks_[i].start_offset;
      progress_[i].lines_consumed = tasks_[i].start_line;
    }
    return store_.Exec("BEGIN TRANSACTION");
  }

  Status Write(const RecordBatch& b, IngestReport& report) {
    std::vector<int32_t> comm_ids, process_ids, op_ids;
    COLLSCOPE_RETURN_IF_ERROR(MapDictionaries(b, comm_ids, process_ids, op_ids));
    COLLSCOPE_RETURN_IF_ERROR(WriteRecords(b, op_ids, process_ids));
    COLLSCOPE_RETURN_IF_ERROR(WriteKernelEvents(b));
    COLLSCOPE_RETURN_IF_ERROR(WriteAnnotations(b));
    COLLSCOPE_RETURN_IF_ERROR(WriteDumpStats(b, comm_ids, process_ids));
    COLLSCOPE_RETURN_IF_ERROR(WriteProxyOps(b, comm_ids, process_ids));
    COLLSCOPE_RETURN_IF_ERROR(WriteProxySteps(b, comm_ids, process_ids));
    COLLSCOPE_RETURN_IF_ERROR(WriteRejections(b, report));
    FileProgress& fp = progress_[b.file_index];
    report.lines_read += b.end_line - fp.lines_consumed;
    fp.bytes_consumed = b.end_offset;
    fp.lines_consumed = b.end_line;
    fp.touched = true;
    report.records_stored += b.records();
    report.dump_stats_stored += b.dump_stats.size();
    report.bytes_read += b.bytes;
    if (b.last) report.incomplete_tail_bytes += b.incomplete_tail;
    report.proxy_ops_stored += b.proxy_ops.size();
    report.proxy_steps_stored += b.proxy_steps.size();
    report.records_without_timing_source += b.timing_source_missing;
    return Status::Ok();
  }

  // Flushes the appenders and commits rows together with each touched file's progress.
  Status Commit(bool reopen) {
    for (ChunkAppender* a : {&comms_, &processes_, &operations_, &records_, &kernel_events_,
                             &annotations_, &dump_stats_, &proxy_ops_, &proxy_steps_, &log_})
      COLLSCOPE_RETURN_IF_ERROR(a->Flush());
    std::string upsert;
    for (size_t i = 0; i < tasks_.size(); ++i) {
      FileProgress& fp = progress_[i];
      if (!fp.touched) continue;
      FileTask& t = tasks_[i];
      if (!t.fingerprint_final) {
        uint64_t fp_len = std::min(kFingerprintBytes, fp.bytes_consumed);
        Result<uint64_t> prefix = FingerprintPrefix(t.path, fp_len);
        if (!prefix.ok()) return prefix.status();
        t.fingerprint = *prefix;
        t.fingerprint_final = fp_len == kFingerprintBytes;
      }
      upsert += upsert.empty() ? "INSERT OR REPLACE INTO files VALUES " : ", ";
      // Built piecewise: GCC 12 misreports a long operator+ chain here (-Wrestrict).
      upsert += "(";
      for (const std::string& v :
           {std::to_string(run_id_), std::to_string(t.file_id),
            SqlString(StorablePath(t.path)),
            std::string(t.compressed ? "true" : "false"), std::to_string(fp.bytes_consumed),
            std::to_string(fp.lines_consumed), std::to_string(t.fingerprint),
            std::to_string(t.size), std::to_string(t.mtime_ns)}) {
        upsert += v;
        upsert += ", ";
      }
      upsert.resize(upsert.size() - 2);
      upsert += ")";
      fp.touched = false;
    }
    if (!upsert.empty()) COLLSCOPE_RETURN_IF_ERROR(store_.Exec(upsert));
    COLLSCOPE_RETURN_IF_ERROR(store_.Exec("COMMIT"));
    ++commits_;
    if (reopen) return store_.Exec("BEGIN TRANSACTION");
    return Status::Ok();
  }

  // The appenders hold rows not yet flushed; they must land in the transaction being rolled back,
  // not in an automatic one after it.
  void Rollback() {
    for (ChunkAppender* a : {&comms_, &processes_, &operations_, &records_, &kernel_events_,
                             &annotations_, &dump_stats_, &proxy_ops_, &proxy_steps_, &log_})
      a->Close();
    store_.Exec("ROLLBACK").IgnoreError();
  }
  int commits() const { return commits_; }

 private:
  Status LoadDictionaries() {
    std::string run = std::to_string(run_id_);
    Result<QueryResult> comms = store_.Query(
        "SELECT comm_id, comm_hash, n_ranks, nnodes, comm_name FROM communicators WHERE run_id = " +
        run);
    if (!comms.ok()) return comms.status();
    for (const auto& row : comms->rows) {
      CommKey k;
      k.hash = std::stoull(*row[1]);
      k.n_ranks = std::stoi(*row[2]);
      k.nnodes = std::stoi(*row[3]);
      k.has_name = row[4].has_value();
      k.name = row[4].value_or("");
      int32_t id = std::stoi(*row[0]);
      comm_map_[CommMapKey(k)] = id;
      next_comm_id_ = std::max(next_comm_id_, id + 1);
    }
    Result<QueryResult> ops = store_.Query(
        "SELECT op_id, comm_id, enum_code(kind), enum_code(op), enum_code(algo), "
        "enum_code(proto), peer, msg_size_bytes FROM operations WHERE run_id = " + run);
    if (!ops.ok()) return ops.status();
    for (const auto& row : ops->rows) {
      OpKey k;
      k.comm = static_cast<uint32_t>(std::stoul(*row[1]));
      k.kind = static_cast<uint8_t>(std::stoi(*row[2]));
      k.op = static_cast<uint8_t>(std::stoi(*row[3]));
      k.algo = row[4] ? static_cast<uint8_t>(std::stoi(*row[4])) : kNullEnum;
      k.proto = row[5] ? static_cast<uint8_t>(std::stoi(*row[5])) : kNullEnum;
      k.peer = row[6] ? std::stoi(*row[6]) : kNullI32;
      k.msg_size_bytes = std::stoull(*row[7]);
      int32_t id = std::stoi(*row[0]);
      op_map_[k] = id;
      next_op_id_ = std::max(next_op_id_, id + 1);
    }
    Result<QueryResult> procs = store_.Query(
        "SELECT process_id, hostname, pid FROM processes WHERE run_id = " + run);
    if (!procs.ok()) return procs.status();
    for (const auto& row : procs->rows) {
      int32_t id = std::stoi(*row[0]);
      process_map_[ProcessMapKey(*row[1], std::stoull(*row[2]))] = id;
      next_process_id_ = std::max(next_process_id_, id + 1);
    }
    return Status::Ok();
  }

  Status MapDictionaries(const RecordBatch& b, std::vector<int32_t>& comm_ids,
                         std::vector<int32_t>& process_ids, std::vector<int32_t>& op_ids) {
    for (const CommKey& c : b.comms) {
      auto [it, inserted] = comm_map_.emplace(CommMapKey(c), next_comm_id_);
      comm_ids.push_back(it->second);
      if (!inserted) continue;
      ++next_comm_id_;
      comms_.Column<int32_t>(0)[0] = run_id_;
      comms_.Column<int32_t>(1)[0] = it->second;
      comms_.Column<uint64_t>(2)[0] = c.hash;
      comms_.SetString(3, 0, c.hash_text);
      if (c.has_name) comms_.SetString(4, 0, c.name); else comms_.SetNull(4, 0);
      comms_.Column<int32_t>(5)[0] = c.n_ranks;
      comms_.Column<int32_t>(6)[0] = c.nnodes;
      comms_.Column<uint8_t>(7)[0] = static_cast<uint8_t>(DeriveCollType(c.n_ranks, c.nnodes));
      COLLSCOPE_RETURN_IF_ERROR(comms_.Append(1));
    }
    for (const ProcessKey& p : b.processes) {
      auto [it, inserted] =
          process_map_.emplace(ProcessMapKey(p.hostname, p.pid), next_process_id_);
      process_ids.push_back(it->second);
      if (!inserted) continue;
      ++next_process_id_;
      processes_.Column<int32_t>(0)[0] = run_id_;
      processes_.Column<int32_t>(1)[0] = it->second;
      processes_.SetString(2, 0, p.hostname);
      processes_.Column<uint64_t>(3)[0] = p.pid;
      processes_.SetString(4, 0, p.git_rev);
      processes_.SetString(5, 0, p.rec_mechanism);
      processes_.SetString(6, 0, p.format_version);
      COLLSCOPE_RETURN_IF_ERROR(processes_.Append(1));
    }
    for (OpKey k : b.ops) {
      k.comm = static_cast<uint32_t>(comm_ids[k.comm]);
      auto [it, inserted] = op_map_.emplace(k, next_op_id_);
      op_ids.push_back(it->second);
      if (!inserted) continue;
      ++next_op_id_;
      ChunkAppender& a = operations_;
      a.Column<int32_t>(0)[0] = run_id_;
      a.Column<int32_t>(1)[0] = it->second;
      a.Column<int32_t>(2)[0] = static_cast<int32_t>(k.comm);
      a.Column<uint8_t>(3)[0] = k.kind;
      a.Column<uint8_t>(4)[0] = k.op;
      a.Column<uint8_t>(5)[0] = k.algo;
      if (k.algo == kNullEnum) a.SetNull(5, 0);
      a.Column<uint8_t>(6)[0] = k.proto;
      if (k.proto == kNullEnum) a.SetNull(6, 0);
      a.Column<int32_t>(7)[0] = k.peer;
      if (k.peer == kNullI32) a.SetNull(7, 0);
      a.Column<uint64_t>(8)[0] = k.msg_size_bytes;
      COLLSCOPE_RETURN_IF_ERROR(a.Append(1));
    }
    return Status::Ok();
  }

  Status WriteRecords(const RecordBatch& b, const std::vector<int32_t>& op_ids,
                      const std::vector<int32_t>& process_ids) {
    auto col = [](const char* name) { return ColumnIndex("records", name); };
    static const int kRun = col("run_id"), kFile = col("file_id"), kLine = col("line"),
                     kProcess = col("process_id"), kOp = col("op_id"), kRank = col("rank"),
                     kSn = col("sn"), kExec = col("exec_time_us"), kSource = col("timing_source"),
                     kAlgbw = col("algbw_gbs_override"), kBusbw = col("busbw_gbs_override"),
                     kDumpTs = col("dump_ts_us"), kStartTs = col("start_ts_us"),
                     kStopTs = col("stop_ts_us"), kChannels = col("n_channels"),
                     kGlobalRank = col("global_rank"), kLocalRank = col("local_rank"),
                     kGpu = col("gpu"), kEnqueue = col("enqueue_ts_us"),
                     kKernelStart = col("kernel_start_ts_us"),
                     kKernelStop = col("kernel_stop_ts_us"), kQueue = col("queue_delay_us"),
                     kStartSpread = col("ch_start_spread_us"),
                     kStopSpread = col("ch_stop_spread_us");
    const int32_t file_id = tasks_[b.file_index].file_id;
    ChunkAppender& a = records_;
    for (size_t off = 0; off < b.records(); off += a.capacity()) {
      size_t n = std::min(a.capacity(), b.records() - off);
      int32_t* run = a.Column<int32_t>(kRun);
      int32_t* file = a.Column<int32_t>(kFile);
      int32_t* proc = a.Column<int32_t>(kProcess);
      int32_t* op = a.Column<int32_t>(kOp);
      for (size_t i = 0; i < n; ++i) {
        run[i] = run_id_;
        file[i] = file_id;
        proc[i] = process_ids[b.process_local[off + i]];
        op[i] = op_ids[b.op_local[off + i]];
      }
      FillColumn(a, kLine, b.line, off, n, kNullU64);
      FillColumn(a, kRank, b.rank, off, n, kNullI32);
      FillColumn(a, kSn, b.sn, off, n, kNullU64);
      FillColumn(a, kExec, b.exec_time_us, off, n, kNullU64);
      FillColumn(a, kSource, b.timing_source, off, n, kNullEnum);
      FillOverride(a, kAlgbw, b.algbw_gbs, b.algbw_derived, off, n);
      FillOverride(a, kBusbw, b.busbw_gbs, b.busbw_derived, off, n);
      FillColumn(a, kDumpTs, b.dump_ts_us, off, n, kNullU64);
      FillColumn(a, kStartTs, b.start_ts_us, off, n, kNullU64);
      FillColumn(a, kStopTs, b.stop_ts_us, off, n, kNullU64);
      FillColumn(a, kChannels, b.n_channels, off, n, kNullI32);
      FillColumn(a, kGlobalRank, b.global_rank, off, n, kNullI32);
      FillColumn(a, kLocalRank, b.local_rank, off, n, kNullI32);
      FillColumn(a, kGpu, b.gpu, off, n, kNullI32);
      FillColumn(a, kEnqueue, b.enqueue_ts_us, off, n, kNullU64);
      FillColumn(a, kKernelStart, b.kernel_start_ts_us, off, n, kNullU64);
      FillColumn(a, kKernelStop, b.kernel_stop_ts_us, off, n, kNullU64);
      FillDouble(a, kQueue, b.queue_delay_us, off, n);
      FillDouble(a, kStartSpread, b.ch_start_spread_us, off, n);
      FillDouble(a, kStopSpread, b.ch_stop_spread_us, off, n);
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteAnnotations(const RecordBatch& b) {
    ChunkAppender& a = annotations_;
    const int32_t file_id = tasks_[b.file_index].file_id;
    for (size_t off = 0; off < b.annotations.size(); off += a.capacity()) {
      const size_t n = std::min(a.capacity(), b.annotations.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const RecordBatch::Annotation& x = b.annotations[off + i];
        a.Column<int32_t>(0)[i] = run_id_;
        a.Column<int32_t>(1)[i] = file_id;
        a.Column<uint64_t>(2)[i] = x.line;
        a.Column<int64_t>(3)[i] = x.step;
        if (x.step < 0) a.SetNull(3, i);
        a.SetString(4, i, x.phase);
        if (x.step < 0) a.SetNull(4, i);
        a.Column<int32_t>(5)[i] = x.micro_batch;
        if (x.micro_batch == kNullI32) a.SetNull(5, i);
        a.Column<uint64_t>(6)[i] = x.user_tag;
        if (!x.has_user_tag) a.SetNull(6, i);
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteKernelEvents(const RecordBatch& b) {
    ChunkAppender& a = kernel_events_;
    const int32_t file_id = tasks_[b.file_index].file_id;
    for (size_t off = 0; off < b.ke.size(); off += a.capacity()) {
      size_t n = std::min(a.capacity(), b.ke.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const KernelEvent& k = b.ke[off + i];
        a.Column<int32_t>(0)[i] = run_id_;
        a.Column<int32_t>(1)[i] = file_id;
        a.Column<uint64_t>(2)[i] = b.ke_line[off + i];
        a.Column<int32_t>(3)[i] = k.channel_id;
        if (k.channel_id == kNullI32) a.SetNull(3, i);
        const uint64_t vals[] = {k.start_sn, k.stop_sn, k.record_sn,
                                 k.start_ts_us, k.stop_ts_us, k.record_ts_us};
        for (int c = 0; c < 6; ++c) {
          a.Column<uint64_t>(4 + c)[i] = vals[c];
          if (vals[c] == kNullU64) a.SetNull(4 + c, i);
        }
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteDumpStats(const RecordBatch& b, const std::vector<int32_t>& comm_ids,
                        const std::vector<int32_t>& process_ids) {
    ChunkAppender& a = dump_stats_;
    const int32_t file_id = tasks_[b.file_index].file_id;
    for (size_t off = 0; off < b.dump_stats.size(); off += a.capacity()) {
      size_t n = std::min(a.capacity(), b.dump_stats.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const RecordBatch::DumpStatsRow& d = b.dump_stats[off + i];
        a.Column<int32_t>(0)[i] = run_id_;
        a.Column<int32_t>(1)[i] = file_id;
        a.Column<uint64_t>(2)[i] = d.line;
        a.Column<int32_t>(3)[i] = process_ids[d.process_local];
        a.Column<int32_t>(4)[i] = comm_ids[d.comm_local];
        a.Column<int32_t>(5)[i] = d.rank;
        const uint64_t vals[] = {d.dump_ts_us,
                                 d.coll_records,
                                 d.coll_dropped_total,
                                 d.coll_dropped_since_last_dump,
                                 d.p2p_records,
                                 d.p2p_dropped_total,
                                 d.p2p_dropped_since_last_dump,
                                 d.proxy_records,
                                 d.proxy_dropped_total,
                                 d.proxy_dropped_since_last_dump};
        for (int c = 0; c < 10; ++c) SetU64(a, 6 + c, i, vals[c]);
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteProxyOps(const RecordBatch& b, const std::vector<int32_t>& comm_ids,
                       const std::vector<int32_t>& process_ids) {
    auto col = [](const char* name) { return ColumnIndex("proxy_ops", name); };
    static const int kRun = col("run_id"), kFile = col("file_id"), kLine = col("line"),
                     kProcess = col("process_id"), kComm = col("comm_id"), kRank = col("rank"),
                     kType = col("record_type"), kRecordSn = col("record_sn"),
                     kParentType = col("parent_type"), kParentSn = col("parent_sn"),
                     kOpSn = col("proxy_op_sn"), kChannel = col("channel_id"), kPeer = col("peer"),
                     kDirection = col("direction"), kSteps = col("n_steps"),
                     kChunk = col("chunk_size_bytes"), kCompleted = col("n_steps_completed"),
                     kDropped = col("n_steps_dropped"), kBytes = col("trans_size_bytes"),
                     kTotal = col("total_us"), kStartTs = col("start_ts_us"),
                     kStopTs = col("stop_ts_us"), kDumpTs = col("dump_ts_us");
    ChunkAppender& a = proxy_ops_;
    const int32_t file_id = tasks_[b.file_index].file_id;
    for (size_t off = 0; off < b.proxy_ops.size(); off += a.capacity()) {
      const size_t n = std::min(a.capacity(), b.proxy_ops.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const RecordBatch::ProxyOpRow& row = b.proxy_ops[off + i];
        const ProxyRecord& o = row.op;
        a.Column<int32_t>(kRun)[i] = run_id_;
        a.Column<int32_t>(kFile)[i] = file_id;
        a.Column<uint64_t>(kLine)[i] = row.line;
        a.Column<int32_t>(kProcess)[i] = process_ids[row.process_local];
        a.Column<int32_t>(kComm)[i] = comm_ids[row.comm_local];
        a.Column<int32_t>(kRank)[i] = o.rank;
        SetName(a, kType, i, kProxyRecordTypes, static_cast<uint8_t>(o.record_type));
        SetU64(a, kRecordSn, i, o.record_sn);
        SetName(a, kParentType, i, kProxyParentTypes, o.parent_type);
        SetU64(a, kParentSn, i, o.parent_sn);
        SetU64(a, kOpSn, i, o.proxy_op_sn);
        SetI32(a, kChannel, i, o.channel_id);
        SetI32(a, kPeer, i, o.peer);
        SetName(a, kDirection, i, kProxyDirections, o.direction);
        SetU64(a, kSteps, i, o.n_steps);
        SetU64(a, kChunk, i, o.chunk_size_bytes);
        SetU64(a, kCompleted, i, o.n_steps_completed);
        SetU64(a, kDropped, i, o.n_steps_dropped);
        SetU64(a, kBytes, i, o.trans_size_bytes);
        SetDouble(a, kTotal, i, o.total_us);
        SetU64(a, kStartTs, i, o.start_ts_us);
        SetU64(a, kStopTs, i, o.stop_ts_us);
        a.Column<uint64_t>(kDumpTs)[i] = row.dump_ts_us;
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteProxySteps(const RecordBatch& b, const std::vector<int32_t>& comm_ids,
                         const std::vector<int32_t>& process_ids) {
    auto col = [](const char* name) { return ColumnIndex("proxy_steps", name); };
    static const int kRun = col("run_id"), kFile = col("file_id"), kLine = col("line"),
                     kProcess = col("process_id"), kComm = col("comm_id"), kRank = col("rank"),
                     kOpSn = col("proxy_op_sn"), kParentType = col("parent_type"),
                     kParentSn = col("parent_sn"), kChannel = col("channel_id"),
                     kPeer = col("peer"), kDirection = col("direction"),
                     kStepSn = col("proxy_step_sn"), kStep = col("step"),
                     kBytes = col("trans_size_bytes"), kTotal = col("total_us"),
                     kProduce = col("gpu_produce_us"), kCredit = col("peer_credit_us"),
                     kWire = col("wire_us"), kFlush = col("flush_us"),
                     kConsume = col("gpu_consume_us"), kStopTs = col("stop_ts_us"),
                     kDumpTs = col("dump_ts_us");
    ChunkAppender& a = proxy_steps_;
    const int32_t file_id = tasks_[b.file_index].file_id;
    for (size_t off = 0; off < b.proxy_steps.size(); off += a.capacity()) {
      const size_t n = std::min(a.capacity(), b.proxy_steps.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const RecordBatch::ProxyStepRow& row = b.proxy_steps[off + i];
        const ProxyStep& s = row.step;
        a.Column<int32_t>(kRun)[i] = run_id_;
        a.Column<int32_t>(kFile)[i] = file_id;
        a.Column<uint64_t>(kLine)[i] = row.line;
        a.Column<int32_t>(kProcess)[i] = process_ids[row.process_local];
        a.Column<int32_t>(kComm)[i] = comm_ids[row.comm_local];
        a.Column<int32_t>(kRank)[i] = row.rank;
        SetU64(a, kOpSn, i, row.proxy_op_sn);
        SetName(a, kParentType, i, kProxyParentTypes, row.parent_type);
        SetU64(a, kParentSn, i, row.parent_sn);
        SetI32(a, kChannel, i, row.channel_id);
        SetI32(a, kPeer, i, row.peer);
        SetName(a, kDirection, i, kProxyDirections, row.direction);
        SetU64(a, kStepSn, i, s.proxy_step_sn);
        SetI32(a, kStep, i, s.step);
        SetU64(a, kBytes, i, s.trans_size_bytes);
        SetDouble(a, kTotal, i, s.total_us);
        SetDouble(a, kProduce, i, s.gpu_produce_us);
        SetDouble(a, kCredit, i, s.peer_credit_us);
        SetDouble(a, kWire, i, s.wire_us);
        SetDouble(a, kFlush, i, s.flush_us);
        SetDouble(a, kConsume, i, s.gpu_consume_us);
        SetU64(a, kStopTs, i, s.stop_ts_us);
        a.Column<uint64_t>(kDumpTs)[i] = row.dump_ts_us;
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    return Status::Ok();
  }

  Status WriteRejections(const RecordBatch& b, IngestReport& report) {
    const std::string path = StorablePath(tasks_[b.file_index].path);
    ChunkAppender& a = log_;
    for (size_t off = 0; off < b.rejections.size(); off += a.capacity()) {
      size_t n = std::min(a.capacity(), b.rejections.size() - off);
      for (size_t i = 0; i < n; ++i) {
        const Rejection& r = b.rejections[off + i];
        a.Column<int32_t>(0)[i] = run_id_;
        a.Column<int32_t>(1)[i] = ingest_id_;
        a.SetString(2, i, path);
        a.Column<uint64_t>(3)[i] = r.line;
        a.SetString(4, i, r.reason);
        a.SetString(5, i, r.excerpt);
        if (report.first_rejections.size() < 10)
          report.first_rejections.push_back(path + ":" + std::to_string(r.line) + ": " + r.reason);
      }
      COLLSCOPE_RETURN_IF_ERROR(a.Append(n));
    }
    for (const Rejection& r : b.rejections) {
      report.lines_rejected += r.missing_records == 0;
      report.records_missing += r.missing_records;
    }
    return Status::Ok();
  }

  Store& store_;
  int32_t run_id_, ingest_id_;
  std::vector<FileTask>& tasks_;
  std::vector<FileProgress> progress_;
  std::unordered_map<std::string, int32_t> comm_map_, process_map_;
  std::unordered_map<OpKey, int32_t, OpKeyHash> op_map_;
  int32_t next_comm_id_ = 1, next_process_id_ = 1, next_op_id_ = 1;
  ChunkAppender records_, kernel_events_, annotations_, dump_stats_, proxy_ops_, proxy_steps_,
      comms_, processes_, operations_, log_;
  int commits_ = 0;
};

struct KnownFile {
  int32_t file_id;
  uint64_t bytes_consumed, lines_consumed, fingerprint, size_seen;
  int64_t mtime_ns_seen;
};

}  // namespace

Result<InputFiles> DiscoverInputs(const std::vector<std::string>& paths) {
  return FindInputFiles(paths, [](const std::string& path, bool named) {
    std::string name = fs::path(path).filename().string();
    // Named explicitly, a file is taken whatever its name, except JSON documents (Kineto
    // traces, plugin state files), which are not JSON lines and have readers of their own.
    // Step/phase series, the CUPTI library's kernel summaries and `collscope stacks` files are
    // JSON lines too, and frameworks' iteration logs are often named *.log: all are found by
    // content, with readers of their own.
    auto other_format = [&] {
      return IsStepSeriesFile(path) || IsIterationLog(path) ||
             CollscopeLinesFormatOf(path) != CollscopeLinesFormat::kNone || IsRasReportFile(path) ||
             MetricsFileFormatOf(path) != MetricsFileFormat::kNone;
    };
    if (named) return !(name.ends_with(".json") || name.ends_with(".json.gz")) && !other_format();
    return IsInspectorLogName(name) && !other_format();
  });
}

namespace {

// What earlier ingests of this run already consumed, by path; *next_file_id is the first file id
// none of them uses.
Result<std::unordered_map<std::string, KnownFile>> KnownFiles(Store& store, const std::string& run,
                                                             int32_t* next_file_id) {
  Result<QueryResult> rows = store.Query(
      "SELECT path, file_id, bytes_consumed, lines_consumed, fingerprint, size_seen, "
      "mtime_ns_seen FROM files WHERE run_id = " + run);
  if (!rows.ok()) return rows.status();
  std::unordered_map<std::string, KnownFile> known;
  *next_file_id = 1;
  for (const auto& r : rows->rows) {
    KnownFile k{std::stoi(*r[1]), std::stoull(*r[2]), std::stoull(*r[3]), std::stoull(*r[4]),
                std::stoull(*r[5]), std::stoll(*r[6])};
    known[*r[0]] = k;
    *next_file_id = std::max(*next_file_id, k.file_id + 1);
  }
  return known;
}

struct IngestPlan {
  std::vector<FileTask> tasks;
  std::vector<int32_t> rewritten;  // file ids whose earlier rows are replaced
  uint64_t total_bytes = 0;        // still to read
};

// What to read of each file, and from where: a new file from its start, a grown one from where the
// last ingest stopped, a rewritten one (its first bytes changed) from its start again. Unchanged
// files are counted and left out; files that vanished are reported as skipped.
IngestPlan PlanTasks(const std::vector<std::string>& files,
                     const std::unordered_map<std::string, KnownFile>& known, int32_t next_file_id,
                     IngestReport* report) {
  IngestPlan plan;
  for (const std::string& path : files) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      report->skipped.push_back(path + ": vanished before it could be read");
      continue;
    }
    FileTask t;
    t.path = path;
    t.size = static_cast<uint64_t>(st.st_size);
    t.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    t.compressed = IsGzipPath(path);
    auto it = known.find(StorablePath(path));
    if (it == known.end()) {
      t.file_id = next_file_id++;
    } else {
      const KnownFile& k = it->second;
      t.file_id = k.file_id;
      if (t.size == k.size_seen && t.mtime_ns == k.mtime_ns_seen) {
        ++report->files_unchanged;
        continue;
      }
      Result<uint64_t> fp = FingerprintPrefix(path, std::min(kFingerprintBytes, k.bytes_consumed));
      bool same = fp.ok() && *fp == k.fingerprint && (t.compressed || t.size >= k.bytes_consumed);
      if (same) {
        t.start_offset = k.bytes_consumed;
        t.start_line = k.lines_consumed;
        t.fingerprint = k.fingerprint;
        t.fingerprint_final = k.bytes_consumed >= kFingerprintBytes;
      } else {
        plan.rewritten.push_back(t.file_id);
        ++report->files_rewritten;
      }
    }
    plan.total_bytes += t.size > t.start_offset ? t.size - t.start_offset : 0;
    plan.tasks.push_back(std::move(t));
  }
  return plan;
}

// A file rewritten in place replaces its earlier rows, atomically with its reset progress.
Status ForgetRewritten(Store& store, const std::string& run, const std::vector<int32_t>& rewritten) {
  if (rewritten.empty()) return Status::Ok();
  std::string ids;
  for (int32_t id : rewritten) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  std::string where = " WHERE run_id = " + run + " AND file_id IN (" + ids + ")";
  Status st = store.Exec("BEGIN TRANSACTION; DELETE FROM records" + where +
                         "; DELETE FROM kernel_events" + where +
                         "; DELETE FROM record_annotations" + where + "; DELETE FROM dump_stats" +
                         where + "; DELETE FROM proxy_ops" + where + "; DELETE FROM proxy_steps" +
                         where + "; DELETE FROM files" + where + "; COMMIT");
  if (!st.ok()) {
    store.Exec("ROLLBACK").IgnoreError();
    return st;
  }
  return Status::Ok();
}

// Parses the files on worker threads while this thread stores their batches, committing every
// commit_every_bytes; a failure cancels the parsers and rolls back what was not committed.
Status ParseAndStore(Store& store, int32_t run_id, std::vector<FileTask>& tasks, uint64_t total_bytes,
                     const IngestOptions& options, IngestReport* report) {
  // Largest files first, so the last file to finish is a short one.
  std::vector<size_t> order(tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tasks[a].size - tasks[a].start_offset > tasks[b].size - tasks[b].start_offset;
  });

  Writer writer(store, run_id, report->ingest_id, tasks);
  if (Status init = writer.Init(); !init.ok()) return init;

  int threads = options.threads > 0 ? options.threads
                                    : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<size_t>(1, tasks.size()))));
  BatchQueue queue(static_cast<size_t>(threads) * 2);
  queue.SetProducers(threads);
  std::atomic<size_t> next_task{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      ParseContext ctx(options.block_size);
      for (size_t k; (k = next_task.fetch_add(1)) < order.size();) {
        if (queue.cancelled()) break;
        ParseFile(tasks[order[k]], order[k], ctx, queue);
      }
      queue.ProducerDone();
    });
  }

  Status failure;
  uint64_t since_commit = 0, done_bytes = 0;
  while (auto batch = queue.Pop()) {
    if (!failure.ok()) continue;  // drain so producers can finish
    failure = writer.Write(*batch, *report);
    since_commit += batch->bytes;
    done_bytes += batch->bytes;
    if (options.progress) options.progress(done_bytes, total_bytes);
    if (failure.ok() && since_commit >= options.commit_every_bytes) {
      if (options.fail_after_commits > 0 && writer.commits() >= options.fail_after_commits) {
        failure = Status::Internal("injected failure after " + std::to_string(writer.commits()) +
                                " commits");
      } else {
        failure = writer.Commit(true);
        since_commit = 0;
      }
    }
    if (!failure.ok()) queue.Cancel();
    queue.Recycle(std::move(batch));
  }
  for (auto& w : workers) w.join();
  if (failure.ok()) failure = writer.Commit(false);
  if (!failure.ok()) writer.Rollback();
  return failure;
}

}  // namespace

Result<IngestReport> Ingest(Store& store, const std::vector<std::string>& paths,
                            const IngestOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  IngestReport report;
  Result<InputFiles> inputs = DiscoverInputs(paths);
  if (!inputs.ok()) return inputs.status();
  report.files_seen = inputs->files.size();
  report.skipped = inputs->skipped;

  Result<int32_t> run_id = store.RunId(options.run, true);
  if (!run_id.ok()) return run_id.status();
  report.run_id = *run_id;
  const std::string run = std::to_string(*run_id);

  int32_t next_file_id = 1;
  Result<std::unordered_map<std::string, KnownFile>> known = KnownFiles(store, run, &next_file_id);
  if (!known.ok()) return known.status();
  IngestPlan plan = PlanTasks(inputs->files, *known, next_file_id, &report);
  report.files_read = plan.tasks.size();

  Result<int64_t> ingest_id = store.QueryInt(
      "SELECT coalesce(max(ingest_id), 0) + 1 FROM ingests WHERE run_id = " + run);
  if (!ingest_id.ok()) return ingest_id.status();
  report.ingest_id = static_cast<int32_t>(*ingest_id);

  if (Status st = ForgetRewritten(store, run, plan.rewritten); !st.ok()) return st;
  if (Status st = ParseAndStore(store, *run_id, plan.tasks, plan.total_bytes, options, &report); !st.ok())
    return st;

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Status st = store.Exec(
      "INSERT INTO ingests VALUES (" + run + ", " + std::to_string(report.ingest_id) +
      ", current_localtimestamp() - to_microseconds(" +
      std::to_string(static_cast<int64_t>(report.seconds * 1e6)) +
      "), current_localtimestamp(), " + std::to_string(report.files_seen) + ", " +
      std::to_string(report.files_read) + ", " + std::to_string(report.bytes_read) + ", " +
      std::to_string(report.lines_read) + ", " + std::to_string(report.records_stored) + ", " +
      std::to_string(report.dump_stats_stored) + ", " + std::to_string(report.lines_rejected) +
      ")" + (options.checkpoint ? "; CHECKPOINT" : ""));
  if (!st.ok()) return st;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace collscope
