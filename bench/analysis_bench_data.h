// Synthetic store for the analysis benchmark: a 2,048-GPU job (256 hosts x 8 GPUs) with TP (8
// ranks inside a host), DP (256 ranks, one per host) and world communicators, written straight
// into the store's tables with INSERT ... SELECT FROM range(N) (no files, no parsing), so 37.5 M
// records take a few tens of seconds on 2 cores. Host node-017's NICs run at half speed for a
// third of the steps, so the spatial and temporal primitives have something to find.
#pragma once

#include <cstdint>
#include <string>

namespace collscope::bench {

// Statements that fill an empty store with `records` records in run "bench".
inline std::string SyntheticJobSql(uint64_t records) {
  const std::string n = std::to_string(records);
  return R"sql(
BEGIN TRANSACTION;
INSERT INTO runs VALUES (1, 'bench', current_localtimestamp());
INSERT INTO processes
  SELECT 1, r::INTEGER, printf('node-%03d', r // 8), 40000 + r % 8, 'bench', 'nccl_profiler_interface', 'v4.0'
  FROM range(2048) t(r);
INSERT INTO files
  SELECT 1, r::INTEGER + 1, printf('/bench/node-%03d-pid%d.log', r // 8, 40000 + r % 8), false, 0, 0, 0, 0, 0
  FROM range(2048) t(r);
-- comm 1..256: TP of host h (8 ranks, one host); 257..264: DP of local rank l (256 ranks, one per
-- host); 265: world.
INSERT INTO communicators
  SELECT 1, c::INTEGER, (c * 2654435761)::UBIGINT, printf('0x%x', c * 2654435761),
         CASE WHEN c <= 256 THEN 'TP' WHEN c <= 264 THEN 'DP' ELSE 'WORLD' END,
         CASE WHEN c <= 256 THEN 8 WHEN c <= 264 THEN 256 ELSE 2048 END,
         CASE WHEN c <= 256 THEN 1 ELSE 256 END,
         CASE WHEN c <= 256 THEN 'nvlink-only' WHEN c <= 264 THEN 'nic-only' ELSE 'mixed' END
  FROM range(1, 266) t(c);
-- Operation shapes: TP AllReduce of 16 MiB and 64 MiB, DP ReduceScatter 1 MiB and AllGather
-- 512 KiB per rank, world AllReduce 16 KiB. op_id = comm_id * 8 + slot kind.
INSERT INTO operations
  SELECT 1, (c * 8 + k)::INTEGER, c::INTEGER, 'coll',
         CASE WHEN c <= 256 THEN 'AllReduce' WHEN c <= 264 THEN (CASE k WHEN 0 THEN 'ReduceScatter' ELSE 'AllGather' END) ELSE 'AllReduce' END,
         'RING', 'SIMPLE', NULL,
         CASE WHEN c <= 256 THEN (CASE k WHEN 0 THEN 16777216 ELSE 67108864 END)
              WHEN c <= 264 THEN (CASE k WHEN 0 THEN 1048576 ELSE 524288 END) ELSE 16384 END
  FROM range(1, 266) t(c), range(2) s(k)
  WHERE c <= 264 OR k = 0;
-- 19 records per rank and step: 16 TP AllReduce (alternating sizes), DP ReduceScatter and
-- AllGather, one world AllReduce.
INSERT INTO records
WITH g AS (
  SELECT i, i // (2048 * 19) AS step, (i % (2048 * 19)) // 19 AS r, i % 19 AS slot,
         hash(i) AS h FROM range()sql" + n + R"sql() t(i)),
s AS (
  SELECT *, r // 8 AS host,
         CASE WHEN slot < 16 THEN 1 + r // 8 WHEN slot < 18 THEN 257 + r % 8 ELSE 265 END AS comm,
         CASE WHEN slot < 16 THEN slot % 2 WHEN slot = 16 THEN 0 WHEN slot = 17 THEN 1 ELSE 0 END AS k,
         (h % 1000000) / 1e6 AS u
  FROM g)
SELECT 1, (r + 1)::INTEGER, (step * 19 + slot + 1)::UBIGINT, r::INTEGER, (comm * 8 + k)::INTEGER,
       (CASE WHEN slot < 16 THEN r % 8 WHEN slot < 18 THEN r // 8 ELSE r END)::INTEGER,
       (CASE WHEN slot < 16 THEN step * 8 + slot // 2 ELSE step END)::UBIGINT,
       greatest(1, round(
         CASE WHEN slot < 16 THEN (CASE k WHEN 0 THEN 95 ELSE 340 END)
              WHEN slot < 18 THEN (CASE k WHEN 0 THEN 6700 ELSE 3400 END)
                  * (CASE WHEN step % 300 BETWEEN 100 AND 199 AND host = 17 THEN 2.0 ELSE 1.0 END)
              ELSE 60 END
         * (0.95 + 0.1 * u) * (CASE WHEN u > 0.97 THEN 1.3 ELSE 1.0 END)))::UBIGINT,
       'kernel_gpu', NULL, NULL,
       (1767225600000000 + step * 1000000 + slot * 20000 + (h >> 20) % 300)::UBIGINT,
       NULL, NULL, NULL, r::INTEGER, (r % 8)::INTEGER, (r % 8)::INTEGER,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM s;
COMMIT;
)sql";
}

}  // namespace collscope::bench
