// Saved NCCL RAS status reports for tests, written after ../shared/reference/nccl-ras.md (§6 text,
// §7 JSON): the reference's self-made samples completed with a preamble and job summary, and
// variants for each block the reader models.
#pragma once

#include <string>

namespace collscope::testing {

// 2.30-style text: 8 ranks on 2 nodes; rank 5 launched one AllReduce fewer than the other 7.
inline const std::string kRasTextMismatch = R"(NCCL version 2.30.7 compiled with CUDA 13.0
CUDA runtime version 13000, driver version 13000

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Communicators... (5.012s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         4         8         8   RUNNING  MISMATCH

Errors
======

Warnings
========

#0-0 (00c0ffee12345678) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 912
  Rank 5 has launched up to operation 911 -- GPU 1 managed by process 4242 on node 10.0.0.2

)";

// Text with a job-level INCOMPLETE and DEAD, a communicator missing ranks 6 and 7 (rank 7's
// process is the dead one), and one with an asynchronous error on rank 2.
inline const std::string kRasTextIncomplete = R"(NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8
CUDA runtime version 12080, driver version 12080

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          4            1          8        8

Communicators... (10.020s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2       3-4         8         8   RUNNING  INCOMPLETE
    1         1         1         4         4         4   RUNNING  ERROR

Errors
======

INCOMPLETE
  Missing communicator data from 2 job processes
  Process 5151 on node 10.0.0.2 managing GPU 2
  Process 5252 on node 10.0.0.2 managing GPU 3

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 5252 on node 10.0.0.2 managing GPU 3

#0-0 (0000000000abcdef) INCOMPLETE
  Missing communicator data from 2 ranks
  Rank 6 -- GPU 2 managed by process 5151 on node 10.0.0.2
  Rank 7 -- GPU 3 managed by process 5252 on node 10.0.0.2

#1-0 (0000000000001234) ERROR
  Asynchronous errors on 1 rank
  Rank 2 reported remote process exited or there was a network error -- GPU 2 (NVML 6) managed by process 3030 on node 10.0.0.1

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data

)";

// 2.24-style text: one count for all collectives, group lines without process details.
inline const std::string kRasText224 = R"(NCCL version 2.24.3 compiled with CUDA 12.6
CUDA runtime version 12060, driver version 12060

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      4          8            1         32       32

Communicators... (0.830s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         4         8        32        32   RUNNING  MISMATCH

Errors
======

Warnings
========

#0-0 (1122334455667788) MISMATCH
  Communicator ranks have different collective operation counts
  30 ranks have launched up to operation 77
  Rank 9 has not launched any operations -- [process information not found]
  Rank 17 has launched up to operation 76 -- GPU 1 managed by process 900 on node 10.0.0.3

)";

// The reference's JSON sample: rank 1 launched one AllReduce fewer than rank 0... with a third
// rank so that the behind rank is a minority.
inline const std::string kRasJson = R"({
  "nccl_version": "2.30.7",
  "cuda_runtime_version": 13000,
  "cuda_driver_version": 13000,
  "timestamp": "2026-07-01 10:00:00",
  "communicators_count": 1,
  "communicators": [
    {
      "hash": "0xc0ffee12345678",
      "secondary_hash": "0x1a2b:0x3c4d",
      "size": 4,
      "ranks_count": 3,
      "missing_ranks_count": 1,
      "ranks": [
        {"rank": 0, "host": "10.0.0.1", "pid": 100, "cuda_dev": 0, "nvml_dev": 0,
         "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
         "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 4, "ReduceScatter": 4, "AllReduce": 912}},
        {"rank": 1, "host": "10.0.0.2", "pid": 200, "cuda_dev": 0, "nvml_dev": 0,
         "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
         "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 4, "ReduceScatter": 4, "AllReduce": 911}},
        {"rank": 2, "host": "10.0.0.3", "pid": 300, "cuda_dev": 1, "nvml_dev": 3,
         "status": {"init_state": 0, "async_error": 0, "finalize_called": false, "destroy_flag": false, "abort_flag": false},
         "collective_counts": {"Broadcast": 1, "Reduce": 0, "AllGather": 4, "ReduceScatter": 4, "AllReduce": 912}}
      ],
      "missing_ranks": [
        {"rank": 3, "host": "10.0.0.4", "pid": 400, "cuda_dev": 0, "nvml_dev": 0,
         "status": {"unresponsive": true, "considered_dead": true}}
      ]
    }
  ],
  "ras": {"collection_time_sec": 0.004, "timeouts_count": 0}
}
)";

// An `ncclras -m all` MONITOR log (NCCL 2.29+, text form as the reference gives it): the process
// on 10.0.0.3 is declared dead after a send got stuck; 10.0.0.4 was unresponsive and recovered;
// a peer known only by its socket address reconnects.
inline const std::string kRasMonitorText = R"txt(RAS Monitor Mode - watching for peer changes (Ctrl+C to exit)...
================================================================
[2026-07-01 10:02:00] PEER_NEW: Process 301 on node 10.0.0.3 managing GPU 1 
[2026-07-01 10:02:05] PEER_UNRESPONSIVE: Process 402 on node 10.0.0.4 managing GPUs 2,3 peer not responding for 5s (keepalive warning)
[2026-07-01 10:02:07] PEER_RECOVERED: Process 402 on node 10.0.0.4 managing GPUs 2,3 peer responding again
[2026-07-01 10:02:13] PEER_SEND_STUCK: Process 301 on node 10.0.0.3 managing GPU 1 send operation stuck for 10s, terminating connection
[2026-07-01 10:02:20] PEER_TIMEOUT_DEAD: Process 301 on node 10.0.0.3 managing GPU 1 peer failed to respond for 20s, declaring dead
[2026-07-01 10:02:21] PEER_RETRY: 10.0.0.9<41234> connection attempt timed out after 5s, attempting reconnect
[2026-07-01 10:02:22] PEER_CONNECTED: 10.0.0.9<41234> connection established successfully
)txt";

// The same events in the JSON form: concatenated pretty-printed objects, not JSONL.
inline const std::string kRasMonitorJson = R"json({
  "timestamp": "2026-07-01 10:02:05",
  "group": "TRACE",
  "event": "PEER_UNRESPONSIVE",
  "peer": {
    "host": "10.0.0.2",
    "pid": 200,
    "cuda_devs": [0],
    "nvml_devs": [0]
  },
  "details": "peer not responding for 5s (keepalive warning)"
}
{
  "timestamp": "2026-07-01 10:02:30",
  "group": "LIFECYCLE",
  "event": "PEER_DEAD",
  "peer": {
    "host": "10.0.0.5",
    "pid": 500,
    "cuda_devs": [4, 5],
    "nvml_devs": [4, 5]
  },
  "details": ""
}
)json";

}  // namespace collscope::testing
