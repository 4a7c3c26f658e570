// Reading typed query results straight from DuckDB data chunks (no text rendering), for the large
// per-instance queries of the detectors.
#pragma once

#include <duckdb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace collscope::diagnose {

// A result whose columns were each cast in SQL to BIGINT, DOUBLE or VARCHAR.
struct Columns {
  std::vector<std::vector<int64_t>> i;   // per BIGINT column (in order of appearance)
  std::vector<std::vector<double>> d;    // per DOUBLE column
  std::vector<std::vector<std::string>> s;  // per VARCHAR column
  std::vector<std::vector<uint8_t>> null_i, null_d;  // 1 where NULL
  size_t rows = 0;
};

// Runs `sql` on `conn`; `types` is one char per column: 'i' BIGINT, 'd' DOUBLE, 's' VARCHAR.
Result<Columns> Fetch(duckdb_connection conn, const std::string& sql, const std::string& types);

}  // namespace collscope::diagnose
