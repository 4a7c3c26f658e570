#include "core/readers/flight_recorder.h"
#include "core/readers/kineto.h"

#include <simdjson.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include "core/readers/pickle.h"

namespace collscope::readers {
namespace {

// The rank at the end of a dump's name: "_dump_12", "nccl_trace_rank_3", "rank_3.json".
int TrailingNumber(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.ends_with(".json")) name.resize(name.size() - 5);
  size_t e = name.size();
  size_t b = e;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(name[b - 1]))) --b;
  if (b == e || e - b > 9) return -1;
  return std::stoi(name.substr(b));
}

std::string Shapes(const PyValue* v) {
  if (!v || (v->type != PyValue::Type::kList && v->type != PyValue::Type::kTuple)) return "";
  std::string o;
  for (size_t t = 0; t < v->items.size(); ++t) {
    if (t) o += ";";
    const PyValue& shape = *v->items[t];
    if (shape.type != PyValue::Type::kList && shape.type != PyValue::Type::kTuple) {
      o += shape.AsStr();
      continue;
    }
    for (size_t k = 0; k < shape.items.size(); ++k) o += (k ? "x" : "") + shape.items[k]->AsStr();
  }
  return o;
}

std::string Strs(const PyValue* v) {
  if (!v || (v->type != PyValue::Type::kList && v->type != PyValue::Type::kTuple)) return v ? v->AsStr() : "";
  std::string o;
  for (size_t k = 0; k < v->items.size(); ++k) o += (k ? ";" : "") + v->items[k]->AsStr();
  return o;
}

// PyTorch's JSON dump (`_dump_nccl_trace_json`, torchcomms' FlightRecorderHook) holds the same
// dict as the pickle: converted to the same values, it is read by the same code.
std::shared_ptr<PyValue> FromJson(simdjson::dom::element e) {
  auto v = std::make_shared<PyValue>();
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
      v->type = PyValue::Type::kDict;
      for (auto [k, x] : simdjson::dom::object(e)) {
        auto key = std::make_shared<PyValue>();
        key->type = PyValue::Type::kStr;
        key->s = std::string(k);
        v->dict.emplace_back(std::move(key), FromJson(x));
      }
      break;
    case simdjson::dom::element_type::ARRAY:
      v->type = PyValue::Type::kList;
      for (simdjson::dom::element x : simdjson::dom::array(e)) v->items.push_back(FromJson(x));
      break;
    case simdjson::dom::element_type::STRING:
      v->type = PyValue::Type::kStr;
      v->s = std::string(std::string_view(e));
      break;
    case simdjson::dom::element_type::INT64:
      v->type = PyValue::Type::kInt;
      v->i = int64_t(e);
      break;
    case simdjson::dom::element_type::UINT64:  // past int64: kept as a number, never wrapped
    case simdjson::dom::element_type::DOUBLE:
      v->type = PyValue::Type::kFloat;
      v->f = double(e);
      break;
    case simdjson::dom::element_type::BOOL:
      v->type = PyValue::Type::kBool;
      v->b = bool(e);
      break;
    case simdjson::dom::element_type::NULL_VALUE:
      break;
  }
  return v;
}

constexpr uint64_t kMaxJsonDumpBytes = uint64_t{1} << 30;

Result<std::shared_ptr<PyValue>> ReadJsonDump(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::IOError("cannot open " + path + ": " + ec.message());
  if (size > kMaxJsonDumpBytes) return Status::Corruption(path + ": a JSON Flight Recorder dump over 1 GiB is refused");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.load(path).get(root); err != simdjson::SUCCESS)
    return Status::Corruption(path + ": not a readable JSON Flight Recorder dump: " + simdjson::error_message(err));
  return FromJson(root);
}

bool LooksLikeJsonDump(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(size_t{1} << 16, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  const size_t b = head.find_first_not_of(" \t\r\n");
  return b != std::string::npos && head[b] == '{' && head.find("\"pg_config\"") != std::string::npos &&
         head.find("\"version\"") != std::string::npos;
}

}  // namespace

bool IsFlightRecorderDump(const std::string& path) {
  if (TrailingNumber(path) < 0) return false;
  std::ifstream f(path, std::ios::binary);
  char b[2] = {0, 0};
  if (!f.read(b, 2)) return false;
  return (static_cast<unsigned char>(b[0]) == 0x80 && b[1] >= 2 && b[1] <= 5) || LooksLikeJsonDump(path);
}

bool IsEmptyFlightRecorderDump(const std::string& path) {
  const std::string name = path.substr(path.find_last_of('/') + 1);
  std::error_code ec;
  return TrailingNumber(path) >= 0 && name.find("dump") != std::string::npos &&
         std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 && !ec;
}

Result<FrDump> ReadFlightRecorderDump(const std::string& path) {
  auto root = LooksLikeJsonDump(path) ? ReadJsonDump(path) : ReadPickleFile(path);
  if (!root.ok()) return root.status();
  const PyValue& r = **root;
  if (r.type != PyValue::Type::kDict) return Status::Corruption(path + ": not a Flight Recorder dump (top level is not a dict)");
  FrDump d;
  d.path = path;
  d.rank = TrailingNumber(path);
  if (const PyValue* v = r.Get("rank")) d.rank = static_cast<int>(v->AsInt(d.rank));
  if (const PyValue* v = r.Get("version")) d.version = v->AsStr();
  if (const PyValue* v = r.Get("nccl_version")) d.nccl_version = v->AsStr();
  if (const PyValue* cfg = r.Get("pg_config"); cfg && cfg->type == PyValue::Type::kDict) {
    for (const auto& [k, v] : cfg->dict) {
      FrPg pg;
      pg.name = k->AsStr();
      if (const PyValue* x = v->Get("name")) pg.name = x->AsStr();
      if (const PyValue* x = v->Get("desc")) pg.desc = x->AsStr();
      if (const PyValue* x = v->Get("ranks")) {
        if (x->type == PyValue::Type::kStr) pg.ranks = RankList(x->s);
        else for (const auto& it : x->items) pg.ranks.push_back(static_cast<int>(it->AsInt()));
      }
      d.pgs[pg.name] = pg;
    }
  }
  if (const PyValue* st = r.Get("pg_status"); st && st->type == PyValue::Type::kDict) {
    for (const auto& [k, v] : st->dict) {
      FrPgStatus s;
      if (const PyValue* x = v->Get("last_enqueued_collective")) s.last_enqueued = x->AsInt(-1);
      if (const PyValue* x = v->Get("last_started_collective")) s.last_started = x->AsInt(-1);
      if (const PyValue* x = v->Get("last_completed_collective")) s.last_completed = x->AsInt(-1);
      d.status[k->AsInt(-1)] = s;
    }
  }
  if (const PyValue* es = r.Get("entries"); es && es->type == PyValue::Type::kList) {
    for (const auto& ep : es->items) {
      const PyValue& e = *ep;
      FrEntry x;
      auto i = [&](const char* key, int64_t dflt) { const PyValue* v = e.Get(key); return v ? v->AsInt(dflt) : dflt; };
      auto s = [&](const char* key) { const PyValue* v = e.Get(key); return v ? v->AsStr() : std::string(); };
      x.record_id = i("record_id", 0);
      x.pg_id = i("pg_id", -1);
      if (const PyValue* pg = e.Get("process_group"); pg && pg->items.size() >= 2) {
        x.pg_name = pg->items[0]->AsStr();
        x.pg_desc = pg->items[1]->AsStr();
      }
      x.collective_seq_id = i("collective_seq_id", -1);
      x.p2p_seq_id = i("p2p_seq_id", -1);
      x.op_id = i("op_id", -1);
      x.profiling_name = s("profiling_name");
      x.is_p2p = i("is_p2p", 0) != 0;
      x.state = s("state");
      x.retired = i("retired", 0) != 0;
      x.time_created_ns = i("time_created_ns", 0);
      x.timeout_ms = i("timeout_ms", 0);
      x.input_sizes = Shapes(e.Get("input_sizes"));
      x.output_sizes = Shapes(e.Get("output_sizes"));
      x.input_dtypes = Strs(e.Get("input_dtypes"));
      x.output_dtypes = Strs(e.Get("output_dtypes"));
      d.entries.push_back(std::move(x));
    }
  }
  return d;
}

}  // namespace collscope::readers
