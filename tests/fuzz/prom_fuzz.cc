// NCCL Inspector metric files: the Prometheus textfile's in-memory parser and file reader
// (LineReader's blocks, an unfinished last line) on the same bytes, and the OTLP JSON reader.
#include <string_view>

#include "core/readers/otlp_metrics.h"
#include "core/readers/prom_textfile.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  auto a = collscope::readers::ParsePromTextfile(content, "m.prom");
  (void)collscope::LooksLikePromTextfile(content);
  auto b = collscope::readers::ReadPromTextfile(collscope::fuzz::AsFile(data, size, "m.prom"));
  // The two readers agree on what they read.
  if (a.ok() != b.ok()) __builtin_trap();
  if (a.ok() && (a->samples.size() != b->samples.size() || a->unused != b->unused ||
                 a->incomplete_tail_bytes != b->incomplete_tail_bytes || a->lines != b->lines))
    __builtin_trap();
  (void)collscope::LooksLikeOtlpMetrics(content);
  auto otlp = collscope::readers::ParseOtlpMetrics(content, "m.json");
  if (otlp.ok() && otlp->unused_named.size() > collscope::readers::kMaxPromUnusedNamed)
    __builtin_trap();
  return 0;
}
