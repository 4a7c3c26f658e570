#include "core/bandwidth.h"

#include <cmath>

namespace collscope {
namespace {
// coll_op codes (taxonomy.cc order).
enum Op : uint8_t {
  kAllReduce = 0, kAllGather = 1, kReduceScatter = 2, kBroadcast = 3, kReduce = 4, kSend = 5,
  kRecv = 6, kSendRecv = 7, kAllGatherV = 10,
};
}  // namespace

double Round6(double x) {
  double r = std::round(x * 1000000.0) / 1000000.0;
  return std::isinf(r) || std::isnan(r) ? x : r;
}

Bandwidth InspectorBandwidth(uint8_t op, int32_t n_ranks, uint64_t size, uint64_t exec_us) {
  double traffic = 0, factor = 0;
  double n = static_cast<double>(n_ranks);
  switch (op) {
    case kAllReduce:
      traffic = static_cast<double>(size);
      factor = static_cast<double>(2 * (n_ranks - 1)) / n;
      break;
    case kAllGather: case kReduceScatter: case kAllGatherV:
      traffic = static_cast<double>(size * static_cast<uint64_t>(n_ranks));
      factor = static_cast<double>(n_ranks - 1) / n;
      break;
    case kBroadcast: case kReduce: case kSend: case kRecv: case kSendRecv:
      traffic = static_cast<double>(size);
      factor = 1;
      break;
    default:
      break;
  }
  Bandwidth bw;
  if (exec_us == 0) return bw;
  double seconds = static_cast<double>(exec_us) / 1000000.0;
  double algbw = traffic / 1.0e9 / seconds;
  bw.algbw_gbs = Round6(algbw);
  bw.busbw_gbs = Round6(algbw * factor);
  return bw;
}

const char* const kBandwidthMacrosSql = R"sql(
CREATE OR REPLACE MACRO inspector_traffic(op, n, size) AS
  CASE WHEN op IN ('AllReduce', 'Broadcast', 'Reduce', 'Send', 'Recv', 'SendRecv')
         THEN CAST(size AS DOUBLE)
       WHEN op IN ('AllGather', 'ReduceScatter', 'AllGatherV')
         THEN CAST(CAST(size AS UBIGINT) * CAST(n AS UBIGINT) AS DOUBLE)
       ELSE 0.0 END;
CREATE OR REPLACE MACRO inspector_busbw_factor(op, n) AS
  CASE WHEN op = 'AllReduce' THEN CAST(2 * (n - 1) AS DOUBLE) / CAST(n AS DOUBLE)
       WHEN op IN ('AllGather', 'ReduceScatter', 'AllGatherV')
         THEN CAST(n - 1 AS DOUBLE) / CAST(n AS DOUBLE)
       WHEN op IN ('Broadcast', 'Reduce', 'Send', 'Recv', 'SendRecv') THEN 1.0
       ELSE 0.0 END;
CREATE OR REPLACE MACRO inspector_algbw(op, n, size, t) AS
  CASE WHEN t = 0 THEN 0.0
       ELSE round(inspector_traffic(op, n, size) / 1.0e9 / (CAST(t AS DOUBLE) / 1000000.0), 6) END;
CREATE OR REPLACE MACRO inspector_busbw(op, n, size, t) AS
  CASE WHEN t = 0 THEN 0.0
       ELSE round(inspector_traffic(op, n, size) / 1.0e9 / (CAST(t AS DOUBLE) / 1000000.0)
                  * inspector_busbw_factor(op, n), 6) END;
)sql";

}  // namespace collscope
