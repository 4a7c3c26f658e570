// A log file as ingest reads it, plain or gzip (the first input byte chooses), through the line
// reader's bounds (line length, decompression ratio) and into the Inspector parser.
#include <cstring>
#include <string>
#include "core/inspector_parser.h"
#include "core/line_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gz = data[0] & 1;
  const std::string path = collscope::fuzz::AsFile(data + 1, size - 1, gz ? "node0-pid1.log.gz" : "node0-pid1.log");
  // Small bounds, so that the fuzzer reaches them: 64 KiB blocks, 1 MiB of gzip output.
  collscope::LineReader reader(64 << 10, 1 << 20);
  if (!reader.Open(path, 0).ok()) return 0;
  collscope::InspectorLineParser parser;
  parser.StartFile();
  collscope::LineBlock block;
  for (;;) {
    auto more = reader.Next(&block);
    if (!more.ok() || !*more) break;
    if (block.overlong) continue;
    const char* p = block.data;
    const char* end = block.data + block.size;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      if (nl == nullptr) __builtin_trap();  // blocks hold complete lines only
      collscope::ParsedLine out;
      std::string reason;
      parser.Parse(p, static_cast<size_t>(nl - p), block.readable - static_cast<size_t>(p - block.data), &out, &reason);
      p = nl + 1;
    }
  }
  return 0;
}
