// Printing query results for people (aligned table) and programs (JSON).
#pragma once

#include <cstdio>
#include <string>

#include "capture/common/json_escape.h"
#include "core/store.h"

namespace collscope::cli {

void PrintTable(const QueryResult& r, std::FILE* out, size_t max_rows = 1000);
// An array of objects, one per row; numbers and booleans unquoted, NULL as null.
std::string ToJson(const QueryResult& r);
void PrintCsv(const QueryResult& r, std::FILE* out);
using capture::JsonQuoted;

// Exit statuses, one table for every command (docs/cli.md): 0 success; 1 the command's own
// "something to report" (findings, lines rejected, floors missed); 2 a usage error or an input
// that cannot be used (invalid argument, not found, corruption, unsupported); 3 the system refused
// (I/O: open, read, write, connect); 4 an internal error of collscope or of a library it calls.
int ExitStatusFor(const Status& status);
// Prints "collscope COMMAND: message (kind of failure)" on stderr and returns ExitStatusFor(status).
int Fail(const char* command, const Status& status);

// The one default-run rule of every command: when `*run` is empty, the store's run with the most
// records (Store::DefaultRun), said on stderr. False, with the reason printed, when there is none.
bool PickRun(Store& store, const char* command, std::string* run);

}  // namespace collscope::cli
