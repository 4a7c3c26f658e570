// Renders DuckDB results to text from their data chunks: every type by value (nested LIST,
// STRUCT, MAP and ARRAY values, UUID, DECIMAL, HUGEINT, temporal types) and ENUMs by name,
// in the text DuckDB's own CAST(x AS VARCHAR) gives. The row-wise accessors it replaces
// printed ENUM, UUID and nested values as empty strings.
#pragma once

#include <duckdb.h>

#include <string>

#include "core/store.h"

namespace collscope {

// Consumes `result`'s chunks into a QueryResult. NULL values are std::nullopt.
Result<QueryResult> RenderResult(duckdb_result* result);

}  // namespace collscope
