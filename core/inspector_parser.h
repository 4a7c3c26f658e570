// Parses one NCCL Inspector JSON line into a ParsedLine, or says why it cannot be stored.
// Accepts every format seen in the wild (see docs/formats.md): v4.0-v4.2, coll_perf, p2p_perf,
// dump_stats, verbose event traces, "nan" doubles, and the collscope plugin's extra object.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "core/inspector_record.h"

namespace collscope {

class InspectorLineParser {
 public:
  // `data` holds the line without its newline; at least len + simdjson::SIMDJSON_PADDING bytes
  // starting at `data` must be readable. Returns true and fills `out`, or false and sets
  // `reason` to a message for the ingest log.
  bool Parse(const char* data, size_t len, size_t readable, ParsedLine* out, std::string* reason);

 private:
  simdjson::ondemand::parser parser_;
};

}  // namespace collscope
