#include "core/render.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace collscope {
namespace {

// Owns a duckdb_logical_type for the scope of one rendering call.
struct LogicalType {
  duckdb_logical_type t;
  explicit LogicalType(duckdb_logical_type type) : t(type) {}
  ~LogicalType() { duckdb_destroy_logical_type(&t); }
  LogicalType(const LogicalType&) = delete;
  LogicalType& operator=(const LogicalType&) = delete;
};

std::string Owned(char* s) {
  std::string out = s ? s : "";
  if (s) duckdb_free(s);
  return out;
}

std::string U128(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

std::string I128(__int128 v) {
  if (v >= 0) return U128(static_cast<unsigned __int128>(v));
  return "-" + U128(static_cast<unsigned __int128>(0) - static_cast<unsigned __int128>(v));
}

// DuckDB's shortest round-trip form: fixed notation for decimal exponents in [-4, 16), with
// ".0" on whole numbers; scientific (1e+16, 1e-05) outside.
template <typename F>
std::string Floating(F v) {
  if (v != v) return "nan";
  if (v == static_cast<F>(1.0 / 0.0)) return "inf";
  if (v == static_cast<F>(-1.0 / 0.0)) return "-inf";
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, sci.ptr);
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  if (exp < -4 || exp >= 16) {
    // to_chars writes e+16 / e-05 already, as DuckDB does.
    return s;
  }
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  std::string f(buf, fixed.ptr);
  if (f.find('.') == std::string::npos) f += ".0";
  return f;
}

std::string Decimal(__int128 v, uint8_t scale) {
  bool neg = v < 0;
  std::string digits = U128(neg ? static_cast<unsigned __int128>(0) - static_cast<unsigned __int128>(v)
                                : static_cast<unsigned __int128>(v));
  if (scale > 0) {
    if (digits.size() <= scale) digits.insert(0, scale + 1 - digits.size(), '0');
    digits.insert(digits.size() - scale, ".");
  }
  return (neg ? "-" : "") + digits;
}

std::string Date(duckdb_date d) {
  if (d.days == INT32_MAX) return "infinity";
  if (d.days == -INT32_MAX) return "-infinity";
  duckdb_date_struct s = duckdb_from_date(d);
  char buf[48];
  if (s.year > 0)
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", s.year, s.month, s.day);
  else  // DuckDB writes year 0 as 1 BC
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d (BC)", 1 - s.year, s.month, s.day);
  return buf;
}

std::string TimeOfDay(int64_t micros) {
  char buf[48];
  int64_t h = micros / 3600000000LL, m = micros / 60000000LL % 60, s = micros / 1000000 % 60,
          us = micros % 1000000;
  int n = std::snprintf(buf, sizeof buf, "%02" PRId64 ":%02" PRId64 ":%02" PRId64, h, m, s);
  if (us) {
    std::snprintf(buf + n, sizeof buf - n, ".%06" PRId64, us);
    std::string t = buf;
    while (t.back() == '0') t.pop_back();
    return t;
  }
  return buf;
}

std::string Timestamp(int64_t micros) {
  if (micros == INT64_MAX) return "infinity";
  if (micros == -INT64_MAX) return "-infinity";
  int64_t days = micros / 86400000000LL, rest = micros % 86400000000LL;
  if (rest < 0) {
    rest += 86400000000LL;
    --days;
  }
  return Date(duckdb_date{static_cast<int32_t>(days)}) + " " + TimeOfDay(rest);
}

std::string Interval(duckdb_interval v) {
  std::string out;
  auto part = [&](int64_t n, const char* unit) {
    if (!n) return;
    if (!out.empty()) out += " ";
    out += std::to_string(n) + " " + unit + (n == 1 || n == -1 ? "" : "s");
  };
  part(v.months / 12, "year");
  part(v.months % 12, "month");
  part(v.days, "day");
  if (v.micros) {
    if (!out.empty()) out += " ";
    out += (v.micros < 0 ? "-" : "") + TimeOfDay(v.micros < 0 ? -v.micros : v.micros);
  }
  return out.empty() ? "00:00:00" : out;
}

std::string Uuid(duckdb_hugeint v) {
  // DuckDB stores a UUID as a HUGEINT with its top bit flipped, so that it sorts as unsigned.
  uint64_t hi = static_cast<uint64_t>(v.upper) ^ (uint64_t{1} << 63), lo = v.lower;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
                hi >> 32, (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48, lo & uint64_t{0xffffffffffff});
  return buf;
}

std::string Blob(const char* p, uint32_t n) {
  std::string out;
  for (uint32_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    if (c >= 32 && c <= 126 && c != '\\' && c != '\'' && c != '"') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

// A VARCHAR inside a LIST, STRUCT or MAP is quoted when its bare text would read as structure.
std::string NestedString(const std::string& s) {
  bool quote = s.empty() || s == "NULL" || s.front() == ' ' || s.back() == ' ' ||
               s.find_first_of(",[]{}'\":=()\\\n\t") != std::string::npos;
  if (!quote) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

struct Renderer {
  // Renders row `row` of `vector`, whose logical type is `type`; `nested` marks a value inside a
  // LIST, STRUCT or MAP (strings there may be quoted).
  static std::optional<std::string> Value(duckdb_vector vector, duckdb_logical_type type, idx_t row,
                                          bool nested) {
    uint64_t* validity = duckdb_vector_get_validity(vector);
    if (validity && !duckdb_validity_row_is_valid(validity, row)) return std::nullopt;
    void* data = duckdb_vector_get_data(vector);
    duckdb_type id = duckdb_get_type_id(type);
    switch (id) {
      case DUCKDB_TYPE_BOOLEAN: return static_cast<bool*>(data)[row] ? "true" : "false";
      case DUCKDB_TYPE_TINYINT: return std::to_string(static_cast<int8_t*>(data)[row]);
      case DUCKDB_TYPE_SMALLINT: return std::to_string(static_cast<int16_t*>(data)[row]);
      case DUCKDB_TYPE_INTEGER: return std::to_string(static_cast<int32_t*>(data)[row]);
      case DUCKDB_TYPE_BIGINT: return std::to_string(static_cast<int64_t*>(data)[row]);
      case DUCKDB_TYPE_UTINYINT: return std::to_string(static_cast<uint8_t*>(data)[row]);
      case DUCKDB_TYPE_USMALLINT: return std::to_string(static_cast<uint16_t*>(data)[row]);
      case DUCKDB_TYPE_UINTEGER: return std::to_string(static_cast<uint32_t*>(data)[row]);
      case DUCKDB_TYPE_UBIGINT: return std::to_string(static_cast<uint64_t*>(data)[row]);
      case DUCKDB_TYPE_HUGEINT: {
        duckdb_hugeint h = static_cast<duckdb_hugeint*>(data)[row];
        return I128((static_cast<__int128>(h.upper) << 64) | h.lower);
      }
      case DUCKDB_TYPE_UHUGEINT: {
        duckdb_uhugeint h = static_cast<duckdb_uhugeint*>(data)[row];
        return U128((static_cast<unsigned __int128>(h.upper) << 64) | h.lower);
      }
      case DUCKDB_TYPE_FLOAT: return Floating(static_cast<float*>(data)[row]);
      case DUCKDB_TYPE_DOUBLE: return Floating(static_cast<double*>(data)[row]);
      case DUCKDB_TYPE_DECIMAL: {
        uint8_t scale = duckdb_decimal_scale(type);
        switch (duckdb_decimal_internal_type(type)) {
          case DUCKDB_TYPE_SMALLINT: return Decimal(static_cast<int16_t*>(data)[row], scale);
          case DUCKDB_TYPE_INTEGER: return Decimal(static_cast<int32_t*>(data)[row], scale);
          case DUCKDB_TYPE_BIGINT: return Decimal(static_cast<int64_t*>(data)[row], scale);
          default: {
            duckdb_hugeint h = static_cast<duckdb_hugeint*>(data)[row];
            return Decimal((static_cast<__int128>(h.upper) << 64) | h.lower, scale);
          }
        }
      }
      case DUCKDB_TYPE_VARCHAR: {
        duckdb_string_t* s = static_cast<duckdb_string_t*>(data) + row;
        std::string v(duckdb_string_t_data(s), duckdb_string_t_length(*s));
        return nested ? NestedString(v) : v;
      }
      case DUCKDB_TYPE_BLOB: {
        duckdb_string_t* s = static_cast<duckdb_string_t*>(data) + row;
        return Blob(duckdb_string_t_data(s), duckdb_string_t_length(*s));
      }
      case DUCKDB_TYPE_ENUM: {
        idx_t index = 0;
        switch (duckdb_enum_internal_type(type)) {
          case DUCKDB_TYPE_UTINYINT: index = static_cast<uint8_t*>(data)[row]; break;
          case DUCKDB_TYPE_USMALLINT: index = static_cast<uint16_t*>(data)[row]; break;
          default: index = static_cast<uint32_t*>(data)[row]; break;
        }
        std::string v = Owned(duckdb_enum_dictionary_value(type, index));
        return nested ? NestedString(v) : v;
      }
      case DUCKDB_TYPE_UUID: return Uuid(static_cast<duckdb_hugeint*>(data)[row]);
      case DUCKDB_TYPE_DATE: return Date(static_cast<duckdb_date*>(data)[row]);
      case DUCKDB_TYPE_TIME: return TimeOfDay(static_cast<duckdb_time*>(data)[row].micros);
      case DUCKDB_TYPE_TIME_TZ: {
        duckdb_time_tz_struct t = duckdb_from_time_tz(static_cast<duckdb_time_tz*>(data)[row]);
        int64_t micros = ((t.time.hour * 60LL + t.time.min) * 60 + t.time.sec) * 1000000 + t.time.micros;
        int off = t.offset, a = off < 0 ? -off : off;
        char buf[16];
        if (a % 3600) std::snprintf(buf, sizeof buf, "%c%02d:%02d", off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
        else std::snprintf(buf, sizeof buf, "%c%02d", off < 0 ? '-' : '+', a / 3600);
        return TimeOfDay(micros) + buf;
      }
      case DUCKDB_TYPE_TIMESTAMP: return Timestamp(static_cast<int64_t*>(data)[row]);
      case DUCKDB_TYPE_TIMESTAMP_S: return Timestamp(static_cast<int64_t*>(data)[row] * 1000000);
      case DUCKDB_TYPE_TIMESTAMP_MS: return Timestamp(static_cast<int64_t*>(data)[row] * 1000);
      case DUCKDB_TYPE_TIMESTAMP_NS: {
        int64_t ns = static_cast<int64_t*>(data)[row];
        std::string base = Timestamp(ns / 1000 - (ns % 1000 < 0 ? 1 : 0));
        int64_t sub = ((ns % 1000) + 1000) % 1000;
        if (!sub) return base;
        // Nanoseconds extend the microsecond digits.
        char buf[8];
        std::snprintf(buf, sizeof buf, "%03" PRId64, sub);
        std::string frac = buf;
        while (frac.back() == '0') frac.pop_back();
        size_t dot = base.find('.', 11);
        if (dot == std::string::npos) return base + ".000000" + frac;
        return base + std::string(6 - (base.size() - dot - 1), '0') + frac;
      }
      case DUCKDB_TYPE_TIMESTAMP_TZ:
        // Stored as UTC; collscope renders it in UTC whatever the machine's zone.
        return Timestamp(static_cast<int64_t*>(data)[row]) + "+00";
      case DUCKDB_TYPE_INTERVAL: return Interval(static_cast<duckdb_interval*>(data)[row]);
      case DUCKDB_TYPE_LIST: {
        duckdb_list_entry e = static_cast<duckdb_list_entry*>(data)[row];
        LogicalType child(duckdb_list_type_child_type(type));
        return Sequence(duckdb_list_vector_get_child(vector), child.t, e.offset, e.length);
      }
      case DUCKDB_TYPE_ARRAY: {
        idx_t size = duckdb_array_type_array_size(type);
        LogicalType child(duckdb_array_type_child_type(type));
        return Sequence(duckdb_array_vector_get_child(vector), child.t, row * size, size);
      }
      case DUCKDB_TYPE_MAP: {
        duckdb_list_entry e = static_cast<duckdb_list_entry*>(data)[row];
        duckdb_vector entries = duckdb_list_vector_get_child(vector);
        LogicalType key(duckdb_map_type_key_type(type)), value(duckdb_map_type_value_type(type));
        std::string out = "{";
        for (idx_t i = 0; i < e.length; ++i) {
          if (i) out += ", ";
          out += Value(duckdb_struct_vector_get_child(entries, 0), key.t, e.offset + i, true).value_or("NULL");
          out += "=";
          out += Value(duckdb_struct_vector_get_child(entries, 1), value.t, e.offset + i, true).value_or("NULL");
        }
        return out + "}";
      }
      case DUCKDB_TYPE_STRUCT: {
        std::string out = "{";
        for (idx_t i = 0, n = duckdb_struct_type_child_count(type); i < n; ++i) {
          LogicalType child(duckdb_struct_type_child_type(type, i));
          if (i) out += ", ";
          out += "'" + Owned(duckdb_struct_type_child_name(type, i)) + "': ";
          out += Value(duckdb_struct_vector_get_child(vector, i), child.t, row, true).value_or("NULL");
        }
        return out + "}";
      }
      case DUCKDB_TYPE_UNION: {
        // A union is a struct of (tag, member...); the value is the tagged member's.
        uint8_t tag = static_cast<uint8_t*>(duckdb_vector_get_data(duckdb_struct_vector_get_child(vector, 0)))[row];
        LogicalType member(duckdb_union_type_member_type(type, tag));
        return Value(duckdb_struct_vector_get_child(vector, tag + 1), member.t, row, nested);
      }
      case DUCKDB_TYPE_SQLNULL: return std::nullopt;
      default: {
        // BIT, BIGNUM and types added after this renderer: named, never printed as a blank.
        LogicalType self(duckdb_vector_get_column_type(vector));
        return "<unrenderable " + Owned(duckdb_logical_type_get_alias(self.t)) + " type " +
               std::to_string(static_cast<int>(id)) + ">";
      }
    }
  }

  static std::string Sequence(duckdb_vector child, duckdb_logical_type type, idx_t offset, idx_t n) {
    std::string out = "[";
    for (idx_t i = 0; i < n; ++i) {
      if (i) out += ", ";
      out += Value(child, type, offset + i, true).value_or("NULL");
    }
    return out + "]";
  }
};

}  // namespace

Result<QueryResult> RenderResult(duckdb_result* r) {
  QueryResult out;
  idx_t cols = duckdb_column_count(r);
  for (idx_t c = 0; c < cols; ++c) {
    out.columns.emplace_back(duckdb_column_name(r, c));
    out.types.push_back(duckdb_column_type(r, c));
  }
  while (true) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(*r);
    if (!chunk) break;
    idx_t n = duckdb_data_chunk_get_size(chunk);
    size_t first = out.rows.size();
    out.rows.resize(first + n, std::vector<std::optional<std::string>>(cols));
    for (idx_t c = 0; c < cols; ++c) {
      duckdb_vector v = duckdb_data_chunk_get_vector(chunk, c);
      LogicalType type(duckdb_vector_get_column_type(v));
      for (idx_t i = 0; i < n; ++i) out.rows[first + i][c] = Renderer::Value(v, type.t, i, false);
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  if (const char* e = duckdb_result_error(r)) return Status::Internal(std::string("query failed: ") + e);
  return out;
}

}  // namespace collscope
