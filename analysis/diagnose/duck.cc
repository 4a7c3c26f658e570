#include "analysis/diagnose/duck.h"

namespace collscope::diagnose {

Result<Columns> Fetch(duckdb_connection conn, const std::string& sql, const std::string& types) {
  duckdb_result res;
  if (duckdb_query(conn, sql.c_str(), &res) == DuckDBError) {
    std::string msg = duckdb_result_error(&res) ? duckdb_result_error(&res) : "query failed";
    duckdb_destroy_result(&res);
    return Status::Internal(msg);
  }
  Columns c;
  const idx_t ncol = duckdb_column_count(&res);
  if (ncol != types.size()) {
    duckdb_destroy_result(&res);
    return Status::Internal("internal: column count mismatch");
  }
  std::vector<int> slot(ncol);
  for (idx_t k = 0; k < ncol; ++k) {
    if (types[k] == 'i') { slot[k] = static_cast<int>(c.i.size()); c.i.emplace_back(); c.null_i.emplace_back(); }
    else if (types[k] == 'd') { slot[k] = static_cast<int>(c.d.size()); c.d.emplace_back(); c.null_d.emplace_back(); }
    else { slot[k] = static_cast<int>(c.s.size()); c.s.emplace_back(); }
  }
  while (true) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(res);
    if (!chunk) break;
    const idx_t n = duckdb_data_chunk_get_size(chunk);
    for (idx_t k = 0; k < ncol; ++k) {
      duckdb_vector v = duckdb_data_chunk_get_vector(chunk, k);
      uint64_t* valid = duckdb_vector_get_validity(v);
      auto is_null = [&](idx_t r) { return valid && !duckdb_validity_row_is_valid(valid, r); };
      if (types[k] == 'i') {
        const int64_t* p = static_cast<const int64_t*>(duckdb_vector_get_data(v));
        auto& out = c.i[slot[k]];
        auto& nl = c.null_i[slot[k]];
        for (idx_t r = 0; r < n; ++r) {
          const bool z = is_null(r);
          out.push_back(z ? 0 : p[r]);
          nl.push_back(z);
        }
      } else if (types[k] == 'd') {
        const double* p = static_cast<const double*>(duckdb_vector_get_data(v));
        auto& out = c.d[slot[k]];
        auto& nl = c.null_d[slot[k]];
        for (idx_t r = 0; r < n; ++r) {
          const bool z = is_null(r);
          out.push_back(z ? 0 : p[r]);
          nl.push_back(z);
        }
      } else {
        duckdb_string_t* p = static_cast<duckdb_string_t*>(duckdb_vector_get_data(v));
        auto& out = c.s[slot[k]];
        for (idx_t r = 0; r < n; ++r) {
          if (is_null(r)) { out.emplace_back(); continue; }
          duckdb_string_t& st = p[r];
          const uint32_t len = duckdb_string_t_length(st);
          out.emplace_back(duckdb_string_t_data(&st), len);
        }
      }
    }
    c.rows += n;
    duckdb_destroy_data_chunk(&chunk);
  }
  duckdb_destroy_result(&res);
  return c;
}

}  // namespace collscope::diagnose
