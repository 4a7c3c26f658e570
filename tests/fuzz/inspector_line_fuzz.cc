// NCCL Inspector JSON lines, one per input line, through the parser that ingest runs (markers of
// v4.3/v4.4 carry context from line to line, so a whole input is one file).
#include <cstring>
#include <string>
#include <vector>
#include "core/inspector_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collscope::InspectorLineParser parser;
  parser.StartFile();
  std::vector<char> line;
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const size_t len = static_cast<size_t>((nl ? nl : end) - p);
    line.assign(len + simdjson::SIMDJSON_PADDING, '\0');
    std::memcpy(line.data(), p, len);
    collscope::ParsedLine out;
    std::string reason;
    if (!parser.Parse(line.data(), len, line.size(), &out, &reason) && reason.empty()) __builtin_trap();
    p += len + 1;
  }
  (void)parser.EndFile();
  return 0;
}
