// NCCL Inspector's bandwidth formulas (docs/formats.md; nccl-tests PERFORMANCE.md), in C++ and as
// the SQL macros the store's views use. Both compute with the same double operations, so a value
// Inspector wrote can be recognised as derivable at ingest (and not stored) and recomputed
// bit-exactly by the views.
#pragma once

#include <cstdint>

namespace collscope {

struct Bandwidth {
  double algbw_gbs = 0;
  double busbw_gbs = 0;
};

// `op` is a coll_op enum code; n_ranks is the communicator size. Results are rounded to 6
// decimals as Inspector prints them (%lf), with DuckDB's round() semantics.
Bandwidth InspectorBandwidth(uint8_t op, int32_t n_ranks, uint64_t msg_size_bytes,
                             uint64_t exec_time_us);

// round(x, 6) exactly as DuckDB computes it.
double Round6(double x);

// CREATE MACRO statements: inspector_traffic(op, n, size), inspector_busbw_factor(op, n),
// inspector_algbw(op, n, size, t) and inspector_busbw(op, n, size, t).
extern const char* const kBandwidthMacrosSql;

}  // namespace collscope
