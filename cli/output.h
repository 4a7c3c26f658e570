// Printing query results for people (aligned table) and programs (JSON).
#pragma once

#include <cstdio>
#include <string>

#include "core/store.h"

namespace collscope::cli {

void PrintTable(const QueryResult& r, std::FILE* out, size_t max_rows = 1000);
// An array of objects, one per row; numbers and booleans unquoted, NULL as null.
std::string ToJson(const QueryResult& r);
void PrintCsv(const QueryResult& r, std::FILE* out);
std::string JsonString(const std::string& s);

}  // namespace collscope::cli
