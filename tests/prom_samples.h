// NCCL Inspector Prometheus textfiles for tests (and fuzz seeds, bench/fuzz.sh), written after
// ../shared/reference/nccl-inspector.md §1.8 and inspector-formats-2.md §6: the reference's
// self-made 2.30 sample, and a 2.29 file made from the 2.29 writer's format strings.
#pragma once

#include <string>

namespace collscope::testing {

// 2.30 ("v5.1"): per-dump aggregates, a P2P bucket and a PROM_DUMP_STATS counter.
inline const std::string kProm230 = R"(nccl_bus_bandwidth_gbs{version="v5.1",slurm_job_id="812",node="n7",gpu="GPU3",comm_name="dp",n_nodes="2",nranks="16",collective="AllReduce",message_size="16-17MB",algo_proto="RING_SIMPLE"} 171.2
nccl_collective_exec_time_microseconds{version="v5.1",slurm_job_id="812",node="n7",gpu="GPU3",comm_name="dp",n_nodes="2",nranks="16",collective="AllReduce",message_size="16-17MB",algo_proto="RING_SIMPLE"} 182.5
nccl_p2p_exec_time_microseconds{version="v5.1",slurm_job_id="812",node="n7",gpu="GPU3",comm_name="pp",n_nodes="2",nranks="2",p2p_operation="Send",message_size="2-3MB"} 95
nccl_collectives_total{version="v5.1",slurm_job_id="812",node="n7",gpu="GPU3"} 40960
)";

// 2.29: one communicator's latest collective, three lines (algbw, busbw, time), two dumps.
inline const std::string kProm229 = R"(nccl_algorithm_bandwidth_gbs{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="AllReduce",coll_sn="228924",timestamp="2025-10-17T03:31:47Z",message_size="2.00GB"} 120.5
nccl_bus_bandwidth_gbs{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="AllReduce",coll_sn="228924",timestamp="2025-10-17T03:31:47Z",message_size="2.00GB"} 210.875
nccl_collective_exec_time_microseconds{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="AllReduce",coll_sn="228924",timestamp="2025-10-17T03:31:47Z",message_size="2.00GB"} 17821
nccl_algorithm_bandwidth_gbs{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="Broadcast",coll_sn="228925",timestamp="2025-10-17T03:32:17Z",message_size="512B"} 0.0021
nccl_bus_bandwidth_gbs{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="Broadcast",coll_sn="228925",timestamp="2025-10-17T03:32:17Z",message_size="512B"} 0.0021
nccl_collective_exec_time_microseconds{comm_id="0xd152c00f111816",hostname="pool0-0002",rank="4",slurm_job="train",slurm_job_id="4711",nranks="8",n_nodes="1",gpu_device_id="GPU4",collective="Broadcast",coll_sn="228925",timestamp="2025-10-17T03:32:17Z",message_size="512B"} 243
)";

}  // namespace collscope::testing
