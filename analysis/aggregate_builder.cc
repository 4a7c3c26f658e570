#include "analysis/aggregate_builder.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "analysis/flat_map.h"
#include "core/bandwidth.h"

namespace collscope {
namespace {

// RangeBarsSql's defaults (the parameters agg_range_bars materialises) and the size threshold of
// the transfers (TransferSql) and range bars.
constexpr uint64_t kMinBytes = 1048576;
constexpr uint64_t kRangeBinUs = 5000000;
constexpr uint64_t kRangeSnBin = 50;
// Ids index flat vectors; an id past this (never made by the ingest, which numbers from 1) is
// declined rather than allocated for.
constexpr int64_t kMaxId = int64_t{1} << 26;

// A double as a grouping key, as DuckDB groups them: every NaN together, -0.0 with 0.0.
uint64_t KeyBits(double x) {
  if (std::isnan(x)) return 0x7ff8000000000000ull;
  if (x == 0) return 0;
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
double FromBits(uint64_t b) {
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// An optional double without std::optional's size in the hot loop.
struct OptD {
  double v = 0;
  bool ok = false;
};

struct OpDim {
  bool present = false;
  uint8_t op_code = 0;
  bool p2p = false, send = false;
  int32_t n_ranks = 0, comm_id = 0;
  int32_t nnodes = 0;
  int32_t peer_or_minus1 = -1;  // coalesce(peer, -1)
  uint64_t msg = 0;
  int32_t kernel = -1;  // index into State::kernels
  int32_t comm = -1;    // index into State::comm_texts (the communicator's id text)
};

struct Kernel {
  std::string key;
  uint64_t msg = 0;
  int64_t kid = 0;  // dense rank of the key among the run's operations (agg_time.kid)
};

struct CommInfo {
  std::string id;
  std::optional<std::string> name;
};

// shape_busbw(op, n_ranks, size, exec, override): the written override, else Inspector's formula
// (core/bandwidth.h: the SQL macro's double operations); NaN reads as NULL.
OptD ShapeBusbw(const OpDim& d, bool exec_ok, uint64_t exec, bool ovr_ok, double ovr) {
  double v;
  if (ovr_ok) v = ovr;
  else if (!exec_ok) return {};
  else v = InspectorBandwidth(d.op_code, d.n_ranks, d.msg, exec).busbw_gbs;
  if (std::isnan(v)) return {};
  return {v, true};
}

// ---- grouping keys: packed, without padding, so their bytes hash and compare --------------
enum : uint8_t { kRankNull = 1, kExecNull = 2, kOvrNull = 4, kTsNull = 8 };

struct CellKey {  // agg_cells: (process, op, rank, timing source, exec time, override)
  int32_t process, op, rank;
  uint8_t ts, nulls;
  uint16_t zero;
  uint64_t exec, ovr;
  bool operator==(const CellKey&) const = default;
};
struct ValueKey {  // agg_values: (op, exec time, override)
  int32_t op;
  uint32_t nulls;
  uint64_t exec, ovr;
  bool operator==(const ValueKey&) const = default;
};
struct ProcOpKey {  // agg_proc_ops: (process, op, rank, timing source)
  int32_t process, op, rank;
  uint8_t ts, nulls;
  uint16_t zero;
  bool operator==(const ProcOpKey&) const = default;
};
struct TimeKey {  // agg_time: (host id, kernel, second)
  int32_t hid, kernel;
  uint64_t tbin;
  uint32_t tbin_null, zero;
  bool operator==(const TimeKey&) const = default;
};
struct InstKey {  // a transfer instance: (operation or -communicator, sn, rank pair)
  int64_t iop;
  uint64_t sn;
  int32_t pa, pb;
  uint32_t sn_null, zero;
  bool operator==(const InstKey&) const = default;
};
struct PairKey {  // two small ids
  int32_t a, b;
  bool operator==(const PairKey&) const = default;
};
struct ValueGroupKey {  // value counts of a group: (a, b, value bits)
  int32_t a, b;
  uint64_t v;
  bool operator==(const ValueGroupKey&) const = default;
};
struct FineBinKey {  // range bars' bins of a busbw value: (kernel, time bin, sn bin, value bits)
  int32_t kernel;
  uint32_t nulls;  // 1: no time, 2: no sequence number
  uint64_t tbin, sbin, v;
  bool operator==(const FineBinKey&) const = default;
};
struct BinKey {  // range bars' time and sequence-number bins: (kernel, bin, value bits)
  int32_t kernel;
  uint32_t bin_null;
  uint64_t bin, v;
  bool operator==(const BinKey&) const = default;
};
static_assert(std::has_unique_object_representations_v<CellKey> &&
              std::has_unique_object_representations_v<ValueKey> &&
              std::has_unique_object_representations_v<ProcOpKey> &&
              std::has_unique_object_representations_v<TimeKey> &&
              std::has_unique_object_representations_v<InstKey> &&
              std::has_unique_object_representations_v<PairKey> &&
              std::has_unique_object_representations_v<ValueGroupKey> &&
              std::has_unique_object_representations_v<FineBinKey> &&
              std::has_unique_object_representations_v<BinKey>);

struct TimeAcc {
  int64_t records = 0, bw_records = 0;
  double bw_sum = 0, bw_min = 0, bw_max = 0;
  unsigned __int128 time_sum = 0;
  uint64_t max_exec = 0;
  bool exec_any = false;
};
struct InstAcc {
  int32_t min_send_op = INT32_MAX, min_op = INT32_MAX;
  uint64_t min_exec = 0;
  bool exec_ok = false;
  double max_ovr = 0;
  bool ovr_ok = false;
};
struct ProcAcc {
  int64_t records = 0, bw_records = 0;
  __int128 time = 0;
  bool time_any = false;
  double bw_sum = 0;
  bool bw_any = false;
};

// Nearest-rank quantiles of value counts, as the SQL's
//   min(x) FILTER (WHERE sum(n) OVER (ORDER BY x ROWS UNBOUNDED PRECEDING) >= q * total):
// the smallest x whose running count reaches q * total, compared exactly (q = num / den).
struct Quantiles {
  int64_t total = 0;
  double min = 0, p25 = 0, p50 = 0, p75 = 0, max = 0;
};
struct Counted {
  double x;
  int64_t n;
};
Quantiles QuantilesOf(const Counted* v, size_t count) {  // v sorted by x, count > 0
  Quantiles q;
  for (size_t i = 0; i < count; ++i) q.total += v[i].n;
  const __int128 t = q.total;
  bool got25 = false, got50 = false, got75 = false;
  __int128 cum = 0;
  for (size_t i = 0; i < count; ++i) {
    cum += v[i].n;
    if (!got25 && 4 * cum >= t) q.p25 = v[i].x, got25 = true;
    if (!got50 && 2 * cum >= t) q.p50 = v[i].x, got50 = true;
    if (!got75 && 4 * cum >= 3 * t) q.p75 = v[i].x, got75 = true;
  }
  q.min = v[0].x;
  q.max = v[count - 1].x;
  return q;
}

// Value counts of many groups, then each group's quantiles: entries sorted by (group, x).
struct GroupedValues {
  struct Entry {
    uint64_t group;
    double x;
    int64_t n;
  };
  std::vector<Entry> entries;
  // Calls f(group, quantiles) once per group, groups in ascending order.
  template <typename F>
  void ForEachGroup(F&& f) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.group != b.group ? a.group < b.group : a.x < b.x;
    });
    std::vector<Counted> run;
    for (size_t i = 0; i < entries.size();) {
      size_t j = i;
      run.clear();
      for (; j < entries.size() && entries[j].group == entries[i].group; ++j)
        run.push_back({entries[j].x, entries[j].n});
      f(entries[i].group, QuantilesOf(run.data(), run.size()));
      i = j;
    }
  }
};
uint64_t Group2(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// A column type as one letter (i INTEGER, b BIGINT, u UBIGINT, h HUGEINT, d DOUBLE, s VARCHAR,
// e an ENUM stored in one byte), to check a table against what the writers below fill.
char TypeLetter(duckdb_logical_type t) {
  switch (duckdb_get_type_id(t)) {
    case DUCKDB_TYPE_INTEGER: return 'i';
    case DUCKDB_TYPE_BIGINT: return 'b';
    case DUCKDB_TYPE_UBIGINT: return 'u';
    case DUCKDB_TYPE_HUGEINT: return 'h';
    case DUCKDB_TYPE_DOUBLE: return 'd';
    case DUCKDB_TYPE_VARCHAR: return 's';
    case DUCKDB_TYPE_ENUM: return duckdb_enum_internal_type(t) == DUCKDB_TYPE_UTINYINT ? 'e' : '?';
    default: return '?';
  }
}

// One table's rows through DuckDB's appender, a data chunk at a time. Open checks the table's
// column types against `shape` (TypeLetter's letters), so a definition changed in views.cc
// without the builder fails here instead of writing values of the wrong width.
class RowWriter {
 public:
  RowWriter() = default;
  RowWriter(const RowWriter&) = delete;
  RowWriter& operator=(const RowWriter&) = delete;
  ~RowWriter() {
    if (chunk_) duckdb_destroy_data_chunk(&chunk_);
    if (app_) duckdb_appender_destroy(&app_);
  }
  Status Open(duckdb_connection c, const char* table, std::string_view shape) {
    table_ = table;
    if (duckdb_appender_create(c, nullptr, table, &app_) != DuckDBSuccess)
      return Status::Internal(std::string("cannot append to ") + table + ": " +
                           (app_ ? duckdb_appender_error(app_) : "unknown"));
    const idx_t n = duckdb_appender_column_count(app_);
    std::vector<duckdb_logical_type> types(n);
    std::string have;
    for (idx_t i = 0; i < n; ++i) {
      types[i] = duckdb_appender_column_type(app_, i);
      have += TypeLetter(types[i]);
    }
    if (have == shape) chunk_ = duckdb_create_data_chunk(types.data(), n);
    for (auto& t : types) duckdb_destroy_logical_type(&t);
    if (!chunk_)
      return Status::Internal(table_ + " has columns " + have + ", the builder writes " +
                           std::string(shape));
    data_.resize(n);
    Fetch();
    return Status::Ok();
  }
  // Starts a row (appending the chunk first when it is full).
  Status Next() {
    if (n_ == duckdb_vector_size()) COLLSCOPE_RETURN_IF_ERROR(Append());
    row_ = n_++;
    return Status::Ok();
  }
  template <typename T>
  void Set(size_t col, T v) { static_cast<T*>(data_[col])[row_] = v; }
  template <typename T>
  void Opt(size_t col, bool ok, T v) {
    if (ok) Set(col, v);
    else Null(col);
  }
  void Null(size_t col) {
    duckdb_vector v = duckdb_data_chunk_get_vector(chunk_, col);
    duckdb_vector_ensure_validity_writable(v);
    duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), row_);
  }
  void Str(size_t col, const std::string& s) {
    duckdb_vector_assign_string_element_len(duckdb_data_chunk_get_vector(chunk_, col), row_,
                                            s.data(), s.size());
  }
  void Huge(size_t col, __int128 v) {
    duckdb_hugeint h;
    h.lower = static_cast<uint64_t>(v);
    h.upper = static_cast<int64_t>(v >> 64);
    Set(col, h);
  }
  // Appends what is left and flushes it into the connection's transaction.
  Status Finish() {
    if (n_) COLLSCOPE_RETURN_IF_ERROR(Append());
    if (duckdb_appender_flush(app_) != DuckDBSuccess)
      return Status::Internal("flush of " + table_ + " failed: " + duckdb_appender_error(app_));
    return Status::Ok();
  }

 private:
  void Fetch() {
    for (size_t c = 0; c < data_.size(); ++c)
      data_[c] = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk_, c));
  }
  Status Append() {
    duckdb_data_chunk_set_size(chunk_, n_);
    if (duckdb_append_data_chunk(app_, chunk_) != DuckDBSuccess)
      return Status::Internal("append to " + table_ + " failed: " + duckdb_appender_error(app_));
    duckdb_data_chunk_reset(chunk_);
    Fetch();
    n_ = 0;
    return Status::Ok();
  }

  std::string table_;
  duckdb_appender app_ = nullptr;
  duckdb_data_chunk chunk_ = nullptr;
  std::vector<void*> data_;
  size_t n_ = 0, row_ = 0;
};

// The column types of the tables the builder writes (TypeLetter's letters).
constexpr std::string_view kCellsShape = "iiiieuddb", kValuesShape = "iiuddb",
                           kProcOpsShape = "iiiiebhbd", kTimeShape = "ibbuubbdddbud",
                           kHostTimeShape = "ibubd", kHostNormalizedShape = "issibddd",
                           kHostTransferShape = "issbddd", kHostCommShape = "isissbd",
                           kRangeBarsShape = "udiisssbddddd";

}  // namespace

// The scanned columns of up to one data chunk of records, copied out of DuckDB's result, so that
// Compute reads memory of its own on any thread.
struct RecordBlock {
  static constexpr int kColumns = 9;
  static constexpr size_t kWidth[kColumns] = {4, 4, 4, 1, 8, 8, 8, 8, 8};
  size_t rows = 0;
  std::vector<uint8_t> data[kColumns];
  std::vector<uint64_t> valid[kColumns];  // empty: every row valid
};

struct AggregateBuilder::State {

  // ---- what Fetch reads ----
  bool declined = false;
  std::vector<OpDim> ops;                 // by op_id
  std::vector<int32_t> hid_of;            // by process_id: host id (0: no such process)
  std::vector<std::string> hosts;         // by host id - 1
  std::vector<Kernel> kernels;
  std::unordered_map<std::string, int32_t> kernel_index;
  std::vector<std::string> comm_texts;    // distinct communicator id texts
  std::unordered_map<std::string, int32_t> comm_text_index;
  std::unordered_map<int32_t, CommInfo> comms;  // by comm_id
  std::vector<RecordBlock> blocks;        // the run's records (Scan's columns)

  // ---- what Compute counts in its scan ----
  Meta meta;
  // The records of a process come in long runs (a file's batch), so the cells are counted in a
  // small map first (in the core's cache) and added to the large one a few thousand groups at a
  // time: a fraction of the large map's lookups, which miss the cache.
  FlatMap<CellKey, int64_t> cells{1 << 16}, recent_cells{1 << 13};
  FlatMap<TimeKey, TimeAcc> time{1 << 12};
  FlatMap<InstKey, uint32_t> inst_index{1 << 14};  // index + 1 into insts
  std::vector<InstKey> inst_keys;
  std::vector<InstAcc> insts;
  // (instance, host id) of every cross-host record: appended, then sorted and made unique,
  // cheaper than a set's random insert per record.
  std::vector<PairKey> inst_hosts;
  FlatMap<FineBinKey, int64_t> bins{1 << 12};

  // ---- what Compute derives from those, for the writers ----
  FlatMap<ValueKey, int64_t> values{1 << 12};
  FlatMap<ProcOpKey, ProcAcc> proc_ops{1 << 12};
  struct HostKernel {
    int32_t hid, kernel;
    Quantiles q;
  };
  std::vector<HostKernel> host_kernel;  // busbw median per (host id, kernel) of the cells
  struct Transfer {
    int32_t hid, kernel;
    Quantiles q;
    double job_median;
  };
  std::vector<Transfer> transfers;  // instance busbw median per (host id, cross-host kernel)
  struct HostComm {
    int32_t hid, comm_id;
    int64_t instances;
    double norm;
  };
  std::vector<HostComm> host_comms;
  struct Bar {
    const char* dimension;
    int32_t kernel;
    std::optional<std::string> group;
    Quantiles q;
  };
  std::vector<Bar> bars;

  void FlushRecentCells() {
    recent_cells.ForEach([&](const CellKey& k, int64_t n) { cells[k] += n; });
    recent_cells.Clear();
  }
  void Scan(const RecordBlock& block);
  void Derive();
};

AggregateBuilder::AggregateBuilder(Store& store, int32_t run_id, std::string op_dims)
    : store_(store), run_id_(run_id), op_dims_(std::move(op_dims)), s_(std::make_unique<State>()) {}
AggregateBuilder::~AggregateBuilder() = default;

const AggregateBuilder::Meta& AggregateBuilder::meta() const { return s_->meta; }

Status AggregateBuilder::Fetch() {
  State& s = *s_;
  const std::string run = std::to_string(run_id_);
  // ---- dimensions ----
  Result<QueryResult> ops = store_.Query(
      "SELECT d.op_id, d.comm_id, d.comm, d.comm_name, d.n_ranks, d.nnodes, d.kind, d.op, "
      "enum_code(o.op), d.peer, d.msg_size_bytes, d.kernel_key, "
      "dense_rank() OVER (ORDER BY d.kernel_key) FROM " + op_dims_ + " d JOIN operations o "
      "USING (run_id, op_id) WHERE d.run_id = " + run);
  if (!ops.ok()) return ops.status();
  for (const auto& r : ops->rows) {
    for (int c : {0, 1, 2, 4, 5, 6, 7, 8, 10, 11})
      if (!r[c]) s.declined = true;
    if (s.declined) return Status::Ok();
    const int64_t id = std::stoll(*r[0]);
    if (id < 0 || id > kMaxId) {
      s.declined = true;
      return Status::Ok();
    }
    if (s.ops.size() <= static_cast<size_t>(id)) s.ops.resize(id + 1);
    OpDim& d = s.ops[id];
    d.present = true;
    d.comm_id = std::stoi(*r[1]);
    d.n_ranks = std::stoi(*r[4]);
    d.nnodes = std::stoi(*r[5]);
    d.p2p = *r[6] == "p2p";
    d.send = *r[7] == "Send";
    d.op_code = static_cast<uint8_t>(std::stoi(*r[8]));
    d.peer_or_minus1 = r[9] ? std::stoi(*r[9]) : -1;
    d.msg = std::stoull(*r[10]);
    auto [k, added] = s.kernel_index.emplace(*r[11], static_cast<int32_t>(s.kernels.size()));
    if (added) s.kernels.push_back({*r[11], d.msg, std::stoll(*r[12])});
    d.kernel = k->second;
    CommInfo& ci = s.comms[d.comm_id];
    ci.id = *r[2];
    ci.name = r[3];
    auto [t, new_text] = s.comm_text_index.emplace(*r[2], static_cast<int32_t>(s.comm_texts.size()));
    if (new_text) s.comm_texts.push_back(*r[2]);
    d.comm = t->second;
  }
  Result<QueryResult> procs = store_.Query(
      "SELECT process_id, hostname, dense_rank() OVER (ORDER BY hostname) FROM processes "
      "WHERE run_id = " + run);
  if (!procs.ok()) return procs.status();
  for (const auto& r : procs->rows) {
    const int64_t id = r[0] ? std::stoll(*r[0]) : -1;
    if (!r[1] || id < 0 || id > kMaxId) {
      s.declined = true;
      return Status::Ok();
    }
    const int32_t hid = std::stoi(*r[2]);
    if (s.hid_of.size() <= static_cast<size_t>(id)) s.hid_of.resize(id + 1, 0);
    s.hid_of[id] = hid;
    if (s.hosts.size() < static_cast<size_t>(hid)) s.hosts.resize(hid);
    s.hosts[hid - 1] = *r[1];
  }

  // ---- the records, as data chunks for Compute ----
  const std::string sql =
      "SELECT process_id, op_id, rank, enum_code(timing_source), exec_time_us, "
      "busbw_gbs_override, dump_ts_us, coalesce(start_ts_us, kernel_start_ts_us, dump_ts_us), sn "
      "FROM records WHERE run_id = " + run;
  duckdb_result res;
  if (duckdb_query(store_.connection(), sql.c_str(), &res) != DuckDBSuccess) {
    std::string msg = duckdb_result_error(&res);
    duckdb_destroy_result(&res);
    return Status::Internal(msg);
  }
  const duckdb_type want[] = {DUCKDB_TYPE_INTEGER, DUCKDB_TYPE_INTEGER, DUCKDB_TYPE_INTEGER,
                              DUCKDB_TYPE_UTINYINT, DUCKDB_TYPE_UBIGINT, DUCKDB_TYPE_DOUBLE,
                              DUCKDB_TYPE_UBIGINT, DUCKDB_TYPE_UBIGINT, DUCKDB_TYPE_UBIGINT};
  for (idx_t c = 0; c < std::size(want); ++c)
    if (duckdb_column_type(&res, c) != want[c]) {
      duckdb_destroy_result(&res);
      return Status::Internal("records column " + std::to_string(c) + " has an unexpected type");
    }
  for (duckdb_data_chunk chunk; (chunk = duckdb_fetch_chunk(res));) {
    RecordBlock& b = s.blocks.emplace_back();
    b.rows = duckdb_data_chunk_get_size(chunk);
    for (int c = 0; c < RecordBlock::kColumns; ++c) {
      duckdb_vector v = duckdb_data_chunk_get_vector(chunk, c);
      const auto* data = static_cast<const uint8_t*>(duckdb_vector_get_data(v));
      b.data[c].assign(data, data + b.rows * RecordBlock::kWidth[c]);
      if (const uint64_t* valid = duckdb_vector_get_validity(v))
        b.valid[c].assign(valid, valid + (b.rows + 63) / 64);
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  duckdb_destroy_result(&res);
  return Status::Ok();
}

void AggregateBuilder::State::Scan(const RecordBlock& block) {
  const size_t n = block.rows;
  const void* data[RecordBlock::kColumns];
  const uint64_t* valid[RecordBlock::kColumns];
  for (int c = 0; c < RecordBlock::kColumns; ++c) {
    data[c] = block.data[c].data();
    valid[c] = block.valid[c].empty() ? nullptr : block.valid[c].data();
  }
  auto ok = [&](int c, size_t i) { return !valid[c] || ((valid[c][i >> 6] >> (i & 63)) & 1); };
  const auto* process = static_cast<const int32_t*>(data[0]);
  const auto* op = static_cast<const int32_t*>(data[1]);
  const auto* rank = static_cast<const int32_t*>(data[2]);
  const auto* ts = static_cast<const uint8_t*>(data[3]);
  const auto* exec = static_cast<const uint64_t*>(data[4]);
  const auto* ovr = static_cast<const double*>(data[5]);
  const auto* dump = static_cast<const uint64_t*>(data[6]);
  const auto* t = static_cast<const uint64_t*>(data[7]);
  const auto* sn = static_cast<const uint64_t*>(data[8]);
  Meta& m = meta;
  for (size_t i = 0; i < n; ++i) {
    if (!ok(0, i) || !ok(1, i) || process[i] < 0 || op[i] < 0 ||
        static_cast<size_t>(op[i]) >= ops.size() || !ops[op[i]].present ||
        static_cast<size_t>(process[i]) >= hid_of.size() || hid_of[process[i]] == 0) {
      declined = true;
      return;
    }
    const OpDim& d = ops[op[i]];
    const int32_t hid = hid_of[process[i]];
    const bool rank_ok = ok(2, i), ts_ok = ok(3, i), exec_ok = ok(4, i), ovr_ok = ok(5, i),
               t_ok = ok(7, i), sn_ok = ok(8, i);
    // agg_meta
    ++m.records;
    if (ok(6, i)) {
      m.first_dump_us = std::min(m.first_dump_us.value_or(dump[i]), dump[i]);
      m.last_dump_us = std::max(m.last_dump_us.value_or(dump[i]), dump[i]);
    }
    if (t_ok) {
      m.first_ts_us = std::min(m.first_ts_us.value_or(t[i]), t[i]);
      m.last_ts_us = std::max(m.last_ts_us.value_or(t[i]), t[i]);
    }
    // agg_cells
    ++recent_cells[CellKey{process[i], op[i], rank_ok ? rank[i] : 0, ts_ok ? ts[i] : uint8_t{0},
                           static_cast<uint8_t>((rank_ok ? 0 : kRankNull) | (exec_ok ? 0 : kExecNull) |
                                                (ovr_ok ? 0 : kOvrNull) | (ts_ok ? 0 : kTsNull)),
                           0, exec_ok ? exec[i] : 0, ovr_ok ? KeyBits(ovr[i]) : 0}];
    const OptD b = ShapeBusbw(d, exec_ok, exec[i], ovr_ok, ovr[i]);
    // agg_time
    TimeAcc& ta = time[TimeKey{hid, d.kernel, t_ok ? t[i] / 1000000 : 0, t_ok ? 0u : 1u, 0}];
    ++ta.records;
    if (b.ok) {
      if (ta.bw_records == 0) ta.bw_min = ta.bw_max = b.v;
      ta.bw_min = std::min(ta.bw_min, b.v);
      ta.bw_max = std::max(ta.bw_max, b.v);
      ta.bw_sum += b.v;
      ++ta.bw_records;
    }
    if (exec_ok) {
      ta.time_sum += exec[i];
      ta.max_exec = ta.exec_any ? std::max(ta.max_exec, exec[i]) : exec[i];
      ta.exec_any = true;
    }
    if (d.msg < kMinBytes) continue;
    // Range bars' time and sequence-number bins (value counts of non-NULL busbw).
    if (b.ok)
      ++bins[FineBinKey{d.kernel, (t_ok ? 0u : 1u) | (sn_ok ? 0u : 2u),
                        t_ok ? t[i] / kRangeBinUs : 0, sn_ok ? sn[i] / kRangeSnBin : 0,
                        KeyBits(b.v)}];
    if (d.nnodes <= 1) continue;
    // Transfer instances of cross-host operations (TransferSql's ik and i); least/greatest
    // skip a NULL rank, as DuckDB's do.
    const int32_t c = d.peer_or_minus1;
    InstKey ik{d.p2p ? -static_cast<int64_t>(d.comm_id) : op[i], sn_ok ? sn[i] : 0,
               !d.p2p ? -1 : rank_ok ? std::min(rank[i], c) : c,
               !d.p2p ? -1 : rank_ok ? std::max(rank[i], c) : c, sn_ok ? 0u : 1u, 0};
    uint32_t& slot = inst_index[ik];
    if (slot == 0) {
      insts.emplace_back();
      inst_keys.push_back(ik);
      slot = static_cast<uint32_t>(insts.size());
    }
    const uint32_t inst = slot - 1;
    InstAcc& ia = insts[inst];
    if (d.send) ia.min_send_op = std::min(ia.min_send_op, op[i]);
    ia.min_op = std::min(ia.min_op, op[i]);
    if (exec_ok) {
      ia.min_exec = ia.exec_ok ? std::min(ia.min_exec, exec[i]) : exec[i];
      ia.exec_ok = true;
    }
    if (ovr_ok) {
      // DuckDB's max orders NaN above every number.
      const double o = ovr[i];
      if (!ia.ovr_ok || std::isnan(o) || (!std::isnan(ia.max_ovr) && o > ia.max_ovr)) ia.max_ovr = o;
      ia.ovr_ok = true;
    }
    inst_hosts.push_back(PairKey{static_cast<int32_t>(inst), hid});
  }
}

bool AggregateBuilder::Compute() {
  State& s = *s_;
  for (RecordBlock& block : s.blocks) {
    if (!s.declined) s.Scan(block);
    block = RecordBlock();  // its memory back as it goes
    if (s.recent_cells.size() > (1 << 12)) s.FlushRecentCells();
  }
  s.blocks.clear();
  if (s.declined) return false;
  s.FlushRecentCells();
  s.Derive();
  return true;
}

// Everything that does not need the run's kernel_variation medians.
void AggregateBuilder::State::Derive() {
  auto grouped = [](const FlatMap<ValueGroupKey, int64_t>& m) {
    GroupedValues g;
    g.entries.reserve(m.size());
    m.ForEach([&](const ValueGroupKey& k, int64_t n) {
      g.entries.push_back({Group2(k.a, k.b), FromBits(k.v), n});
    });
    return g;
  };
  auto hi = [](uint64_t g) { return static_cast<int32_t>(g >> 32); };
  auto lo = [](uint64_t g) { return static_cast<int32_t>(g & 0xffffffffu); };

  // From the cells: agg_values, agg_proc_ops, and busbw value counts per (host id, kernel) for
  // host_normalized and, for operations of at least 1 MiB, per (kernel, communicator text) and
  // (kernel, host id) for the range bars.
  FlatMap<ValueGroupKey, int64_t> host_kernel_values(1 << 12), comm_values(1 << 12),
      host_values(1 << 12);
  cells.ForEach([&](const CellKey& k, int64_t n) {
    const bool exec_ok = !(k.nulls & kExecNull);
    const OptD b = ShapeBusbw(ops[k.op], exec_ok, k.exec, !(k.nulls & kOvrNull), FromBits(k.ovr));
    values[ValueKey{k.op, static_cast<uint32_t>(k.nulls & (kExecNull | kOvrNull)), k.exec, k.ovr}] += n;
    ProcAcc& p = proc_ops[ProcOpKey{k.process, k.op, k.rank, k.ts,
                                    static_cast<uint8_t>(k.nulls & (kRankNull | kTsNull)), 0}];
    p.records += n;
    if (exec_ok) p.time += static_cast<__int128>(n) * k.exec, p.time_any = true;
    if (!b.ok) return;
    p.bw_records += n, p.bw_sum += static_cast<double>(n) * b.v, p.bw_any = true;
    const OpDim& d = ops[k.op];
    const int32_t hid = hid_of[k.process];
    const uint64_t v = KeyBits(b.v);
    host_kernel_values[ValueGroupKey{hid, d.kernel, v}] += n;
    if (d.msg < kMinBytes) return;
    comm_values[ValueGroupKey{d.kernel, d.comm, v}] += n;
    host_values[ValueGroupKey{d.kernel, hid, v}] += n;
  });
  grouped(host_kernel_values).ForEachGroup([&](uint64_t g, const Quantiles& q) {
    host_kernel.push_back({hi(g), lo(g), q});
  });
  grouped(comm_values).ForEachGroup([&](uint64_t g, const Quantiles& q) {
    bars.push_back({"communicator", hi(g), comm_texts[lo(g)], q});
  });
  grouped(host_values).ForEachGroup([&](uint64_t g, const Quantiles& q) {
    bars.push_back({"host", hi(g), hosts[lo(g) - 1], q});
  });

  // Range bars by time bin and sequence-number bin: the fine bins summed both ways, each grouped
  // through an index of its distinct (kernel, bin) pairs.
  FlatMap<BinKey, int64_t> time_bins(1 << 12), sn_bins(1 << 12);
  bins.ForEach([&](const FineBinKey& k, int64_t n) {
    time_bins[BinKey{k.kernel, k.nulls & 1u, k.tbin, k.v}] += n;
    sn_bins[BinKey{k.kernel, (k.nulls >> 1) & 1u, k.sbin, k.v}] += n;
  });
  auto binned = [&](const FlatMap<BinKey, int64_t>& m, const char* dimension, uint64_t width) {
    std::vector<BinKey> keys;
    FlatMap<BinKey, uint32_t> index(1 << 10);
    GroupedValues g;
    g.entries.reserve(m.size());
    m.ForEach([&](const BinKey& k, int64_t n) {
      uint32_t& i = index[BinKey{k.kernel, k.bin_null, k.bin, 0}];
      if (i == 0) {
        keys.push_back(k);
        i = static_cast<uint32_t>(keys.size());
      }
      g.entries.push_back({i - 1, FromBits(k.v), n});
    });
    g.ForEachGroup([&](uint64_t i, const Quantiles& q) {
      const BinKey& k = keys[i];
      bars.push_back({dimension, k.kernel,
                      k.bin_null ? std::nullopt : std::optional<std::string>(std::to_string(k.bin * width)),
                      q});
    });
  };
  binned(time_bins, "time_bin", kRangeBinUs);
  binned(sn_bins, "sn_bin", kRangeSnBin);

  // Transfers: each instance's busbw (its fastest record: the last rank to arrive), the job
  // median per kernel key over instances, then per host and kernel key (agg_host_transfer) and
  // per host and communicator (agg_host_comm).
  struct Inst {
    int32_t op = 0;
    OptD x;
  };
  std::vector<Inst> ib(insts.size());
  FlatMap<ValueGroupKey, int64_t> job_values(1 << 10);
  for (size_t i = 0; i < insts.size(); ++i) {
    const InstAcc& a = insts[i];
    ib[i].op = a.min_send_op != INT32_MAX ? a.min_send_op : a.min_op;
    const OpDim& d = ops[ib[i].op];
    ib[i].x = ShapeBusbw(d, a.exec_ok, a.min_exec, a.ovr_ok, a.max_ovr);
    if (ib[i].x.ok) ++job_values[ValueGroupKey{d.kernel, 0, KeyBits(ib[i].x.v)}];
  }
  std::vector<OptD> job_median(kernels.size());
  grouped(job_values).ForEachGroup([&](uint64_t g, const Quantiles& q) {
    job_median[hi(g)] = {q.p50, true};
  });
  std::sort(inst_hosts.begin(), inst_hosts.end(), [](const PairKey& x, const PairKey& y) {
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  inst_hosts.erase(std::unique(inst_hosts.begin(), inst_hosts.end()), inst_hosts.end());
  FlatMap<ValueGroupKey, int64_t> instance_values(1 << 12);
  struct CommAcc {
    int64_t instances = 0;
    double ln_sum = 0;
  };
  FlatMap<PairKey, CommAcc> comm_acc(1 << 10);
  for (const PairKey& k : inst_hosts) {
    const Inst& in = ib[k.a];
    // An instance without a sequence number counts in its job median but joins no host: the
    // SQL joins hosts to instances on sn, and NULL equals nothing.
    if (!in.x.ok || inst_keys[k.a].sn_null) continue;
    const OpDim& d = ops[in.op];
    const double jm = job_median[d.kernel].v;
    ++instance_values[ValueGroupKey{k.b, d.kernel, KeyBits(in.x.v)}];
    if (in.x.v > 0 && jm > 0) {
      CommAcc& ca = comm_acc[PairKey{k.b, d.comm_id}];
      ++ca.instances;
      ca.ln_sum += std::log(in.x.v / jm);
    }
  }
  grouped(instance_values).ForEachGroup([&](uint64_t g, const Quantiles& q) {
    transfers.push_back({hi(g), lo(g), q, job_median[lo(g)].v});
  });
  comm_acc.ForEach([&](const PairKey& k, const CommAcc& a) {
    host_comms.push_back({k.a, k.b, a.instances,
                          std::exp(a.ln_sum / static_cast<double>(a.instances))});
  });
}

Status AggregateBuilder::WriteCounts() {
  State& s = *s_;
  duckdb_connection c = store_.connection();
  RowWriter cells, values, procs;
  COLLSCOPE_RETURN_IF_ERROR(cells.Open(c, "agg_cells", kCellsShape));
  COLLSCOPE_RETURN_IF_ERROR(values.Open(c, "agg_values", kValuesShape));
  COLLSCOPE_RETURN_IF_ERROR(procs.Open(c, "agg_proc_ops", kProcOpsShape));
  Status st;
  s.cells.ForEach([&](const CellKey& k, int64_t n) {
    if (!st.ok() || !(st = cells.Next()).ok()) return;
    const bool exec_ok = !(k.nulls & kExecNull), ovr_ok = !(k.nulls & kOvrNull);
    const double ovr = FromBits(k.ovr);
    const OptD b = ShapeBusbw(s.ops[k.op], exec_ok, k.exec, ovr_ok, ovr);
    cells.Set<int32_t>(0, run_id_);
    cells.Set<int32_t>(1, k.process);
    cells.Set<int32_t>(2, k.op);
    cells.Opt<int32_t>(3, !(k.nulls & kRankNull), k.rank);
    cells.Opt<uint8_t>(4, !(k.nulls & kTsNull), k.ts);
    cells.Opt<uint64_t>(5, exec_ok, k.exec);
    cells.Opt<double>(6, ovr_ok, ovr);
    cells.Opt<double>(7, b.ok, b.v);
    cells.Set<int64_t>(8, n);
  });
  COLLSCOPE_RETURN_IF_ERROR(st);
  s.values.ForEach([&](const ValueKey& k, int64_t n) {
    if (!st.ok() || !(st = values.Next()).ok()) return;
    const bool exec_ok = !(k.nulls & kExecNull), ovr_ok = !(k.nulls & kOvrNull);
    const OptD b = ShapeBusbw(s.ops[k.op], exec_ok, k.exec, ovr_ok, FromBits(k.ovr));
    values.Set<int32_t>(0, run_id_);
    values.Set<int32_t>(1, k.op);
    values.Opt<uint64_t>(2, exec_ok, k.exec);
    values.Opt<double>(3, ovr_ok, FromBits(k.ovr));
    values.Opt<double>(4, b.ok, b.v);
    values.Set<int64_t>(5, n);
  });
  COLLSCOPE_RETURN_IF_ERROR(st);
  s.proc_ops.ForEach([&](const ProcOpKey& k, const ProcAcc& p) {
    if (!st.ok() || !(st = procs.Next()).ok()) return;
    procs.Set<int32_t>(0, run_id_);
    procs.Set<int32_t>(1, k.process);
    procs.Set<int32_t>(2, k.op);
    procs.Opt<int32_t>(3, !(k.nulls & kRankNull), k.rank);
    procs.Opt<uint8_t>(4, !(k.nulls & kTsNull), k.ts);
    procs.Set<int64_t>(5, p.records);
    if (p.time_any) procs.Huge(6, p.time);
    else procs.Null(6);
    procs.Set<int64_t>(7, p.bw_records);
    procs.Opt<double>(8, p.bw_any, p.bw_sum);
  });
  COLLSCOPE_RETURN_IF_ERROR(st);
  COLLSCOPE_RETURN_IF_ERROR(cells.Finish());
  COLLSCOPE_RETURN_IF_ERROR(values.Finish());
  return procs.Finish();
}

Status AggregateBuilder::WriteDerived() {
  State& s = *s_;
  duckdb_connection c = store_.connection();
  // The run's kernel_variation rows (one per kernel key, unless a key spans operation kinds):
  // medians normalise agg_time and host_normalized, and their join repeats a row per match.
  struct Kv {
    std::optional<int32_t> nnodes;
    OptD median;
  };
  std::vector<std::vector<Kv>> kv(s.kernels.size());
  Result<QueryResult> kvr = store_.Query(
      "SELECT kernel_key, nnodes, median_busbw_gbs FROM agg_kernel_variation WHERE run_id = " +
      std::to_string(run_id_));
  if (!kvr.ok()) return kvr.status();
  for (const auto& r : kvr->rows) {
    auto k = r[0] ? s.kernel_index.find(*r[0]) : s.kernel_index.end();
    if (k == s.kernel_index.end()) continue;
    Kv row;
    if (r[1]) row.nnodes = std::stoi(*r[1]);
    if (r[2]) row.median = {std::stod(*r[2]), true};
    kv[k->second].push_back(row);
  }
  Status st;

  // agg_time (LEFT JOIN of the medians) and, from its rows, agg_host_time.
  RowWriter time, host_time;
  COLLSCOPE_RETURN_IF_ERROR(time.Open(c, "agg_time", kTimeShape));
  COLLSCOPE_RETURN_IF_ERROR(host_time.Open(c, "agg_host_time", kHostTimeShape));
  struct HostAcc {
    int64_t records = 0;
    double norm_sum = 0;
  };
  FlatMap<TimeKey, HostAcc> ht(1 << 10);
  const std::vector<Kv> no_median(1);
  s.time.ForEach([&](const TimeKey& k, const TimeAcc& a) {
    const Kernel& kern = s.kernels[k.kernel];
    for (const Kv& m : kv[k.kernel].empty() ? no_median : kv[k.kernel]) {
      if (!st.ok() || !(st = time.Next()).ok()) return;
      const bool bw = a.bw_records > 0;
      const bool norm_ok = bw && m.median.ok && m.median.v != 0;
      const double norm = norm_ok ? a.bw_sum / m.median.v : 0;
      time.Set<int32_t>(0, run_id_);
      time.Set<int64_t>(1, k.hid);
      time.Set<int64_t>(2, kern.kid);
      time.Set<uint64_t>(3, kern.msg);
      time.Opt<uint64_t>(4, !k.tbin_null, k.tbin);
      time.Set<int64_t>(5, a.records);
      time.Set<int64_t>(6, a.bw_records);
      time.Opt<double>(7, bw, a.bw_sum);
      time.Opt<double>(8, bw, a.bw_min);
      time.Opt<double>(9, bw, a.bw_max);
      time.Opt<int64_t>(10, a.exec_any, static_cast<int64_t>(a.time_sum));
      time.Opt<uint64_t>(11, a.exec_any, a.max_exec);
      time.Opt<double>(12, norm_ok, norm);
      if (kern.msg >= kMinBytes && norm_ok) {
        HostAcc& h = ht[TimeKey{k.hid, 0, k.tbin, k.tbin_null, 0}];
        h.records += a.bw_records;
        h.norm_sum += norm;
      }
    }
  });
  COLLSCOPE_RETURN_IF_ERROR(st);
  ht.ForEach([&](const TimeKey& k, const HostAcc& h) {
    if (!st.ok() || !(st = host_time.Next()).ok()) return;
    host_time.Set<int32_t>(0, run_id_);
    host_time.Set<int64_t>(1, k.hid);
    host_time.Opt<uint64_t>(2, !k.tbin_null, k.tbin);
    host_time.Set<int64_t>(3, h.records);
    host_time.Set<double>(4, h.norm_sum);
  });
  COLLSCOPE_RETURN_IF_ERROR(st);
  COLLSCOPE_RETURN_IF_ERROR(time.Finish());
  COLLSCOPE_RETURN_IF_ERROR(host_time.Finish());

  // agg_host_normalized: each host's median over the job median, per kernel key (an inner join
  // of kernel_variation).
  RowWriter normalized;
  COLLSCOPE_RETURN_IF_ERROR(normalized.Open(c, "agg_host_normalized", kHostNormalizedShape));
  for (const State::HostKernel& h : s.host_kernel)
    for (const Kv& m : kv[h.kernel]) {
      COLLSCOPE_RETURN_IF_ERROR(normalized.Next());
      normalized.Set<int32_t>(0, run_id_);
      normalized.Str(1, s.hosts[h.hid - 1]);
      normalized.Str(2, s.kernels[h.kernel].key);
      normalized.Opt<int32_t>(3, m.nnodes.has_value(), m.nnodes.value_or(0));
      normalized.Set<int64_t>(4, h.q.total);
      normalized.Set<double>(5, h.q.p50);
      normalized.Opt<double>(6, m.median.ok, m.median.v);
      const bool norm = m.median.ok && m.median.v != 0;
      normalized.Opt<double>(7, norm, norm ? h.q.p50 / m.median.v : 0);
    }
  COLLSCOPE_RETURN_IF_ERROR(normalized.Finish());

  RowWriter transfer, comm;
  COLLSCOPE_RETURN_IF_ERROR(transfer.Open(c, "agg_host_transfer", kHostTransferShape));
  COLLSCOPE_RETURN_IF_ERROR(comm.Open(c, "agg_host_comm", kHostCommShape));
  for (const State::Transfer& t : s.transfers) {
    COLLSCOPE_RETURN_IF_ERROR(transfer.Next());
    transfer.Set<int32_t>(0, run_id_);
    transfer.Str(1, s.hosts[t.hid - 1]);
    transfer.Str(2, s.kernels[t.kernel].key);
    transfer.Set<int64_t>(3, t.q.total);
    transfer.Set<double>(4, t.q.p50);
    transfer.Set<double>(5, t.job_median);
    transfer.Opt<double>(6, t.job_median != 0, t.job_median != 0 ? t.q.p50 / t.job_median : 0);
  }
  for (const State::HostComm& h : s.host_comms) {
    const CommInfo& ci = s.comms.at(h.comm_id);
    COLLSCOPE_RETURN_IF_ERROR(comm.Next());
    comm.Set<int32_t>(0, run_id_);
    comm.Str(1, s.hosts[h.hid - 1]);
    comm.Set<int32_t>(2, h.comm_id);
    comm.Str(3, ci.id);
    if (ci.name) comm.Str(4, *ci.name);
    else comm.Null(4);
    comm.Set<int64_t>(5, h.instances);
    comm.Set<double>(6, h.norm);
  }
  COLLSCOPE_RETURN_IF_ERROR(transfer.Finish());
  COLLSCOPE_RETURN_IF_ERROR(comm.Finish());

  // agg_range_bars at the defaults.
  RowWriter bars;
  COLLSCOPE_RETURN_IF_ERROR(bars.Open(c, "agg_range_bars", kRangeBarsShape));
  for (const State::Bar& b : s.bars) {
    COLLSCOPE_RETURN_IF_ERROR(bars.Next());
    bars.Set<uint64_t>(0, kMinBytes);
    bars.Set<double>(1, static_cast<double>(kRangeBinUs) / 1e6);
    bars.Set<int32_t>(2, static_cast<int32_t>(kRangeSnBin));
    bars.Set<int32_t>(3, run_id_);
    bars.Str(4, s.kernels[b.kernel].key);
    bars.Str(5, b.dimension);
    if (b.group) bars.Str(6, *b.group);
    else bars.Null(6);
    bars.Set<int64_t>(7, b.q.total);
    bars.Set<double>(8, b.q.min);
    bars.Set<double>(9, b.q.p25);
    bars.Set<double>(10, b.q.p50);
    bars.Set<double>(11, b.q.p75);
    bars.Set<double>(12, b.q.max);
  }
  return bars.Finish();
}

}  // namespace collscope
