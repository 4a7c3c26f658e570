// Parses NCCL Inspector JSON lines into ParsedLines, or says why a line cannot be stored.
// Accepts every format seen in the wild (see docs/ingest.md): v4.0-v4.4, coll_perf, p2p_perf,
// dump_stats, verbose event traces, "nan" doubles, and the collscope plugin's extra object.
//
// From v4.3 on, a marker line ({header, metadata, dump_stats}) carries the context of the
// coll_records + p2p_records + proxy_records single-key lines after it, which have no header of
// their own. The parser keeps that context per file: call StartFile before a file's first line
// and EndFile after its last. Nothing of one line's values carries into the next otherwise.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "core/inspector_record.h"

namespace collscope {

// A communicator hash as NCCL prints it ("0x" and up to 16 hex digits, zero-padded or not: Inspector
// writes "%lx", RAS's text form "%016lx"). False for anything else.
bool ParseHexHash(std::string_view text, uint64_t* out);

class InspectorLineParser {
 public:
  // `data` holds the line without its newline; at least len + simdjson::SIMDJSON_PADDING bytes
  // starting at `data` must be readable. Returns true and fills `out`, or false and sets
  // `reason` to a message for the ingest log.
  bool Parse(const char* data, size_t len, size_t readable, ParsedLine* out, std::string* reason);

  void StartFile() { marker_ = Marker{}; }
  // The lines the file's last marker announced that never came (0 when complete).
  uint64_t EndFile() const { return marker_.owed(); }

 private:
  // The context a v4.3/v4.4 marker gives the lines of its batch: the marker's header and
  // metadata fields, with its text owned (the marker's own line buffer is gone by then).
  struct Marker {
    bool active = false;
    bool counts_lines = false;  // v4.3+: the counts announce following lines
    ParsedLine context;
    std::string text[6];  // what context's string views point into
    uint64_t coll_left = 0, p2p_left = 0, proxy_left = 0;
    uint64_t owed() const { return active && counts_lines ? coll_left + p2p_left + proxy_left : 0; }
  };
  void Remember(const ParsedLine& line);

  simdjson::ondemand::parser parser_;
  Marker marker_;
};

}  // namespace collscope
