// GPU smoke test for libnccl-profiler-collscope.so (run by gpu_smoke.sh, not by CTest).
// Two single-rank communicators on GPU 0 run a few collectives of several sizes, then are
// destroyed (the plugin's final drain). Single-rank collectives may run as local copies, so the
// records may carry any timing source; the script reports what NCCL actually delivered.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                                \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
#define CHECK_NCCL(x)                                                                \
  do {                                                                               \
    ncclResult_t r = (x);                                                            \
    if (r != ncclSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

int main() {
  CHECK_CUDA(cudaSetDevice(0));
  const size_t kMax = size_t{64} << 20;  // elements
  float *send, *recv;
  CHECK_CUDA(cudaMalloc(&send, kMax * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&recv, kMax * sizeof(float)));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  ncclComm_t comms[2];
  int dev = 0;
  CHECK_NCCL(ncclCommInitAll(&comms[0], 1, &dev));
  CHECK_NCCL(ncclCommInitAll(&comms[1], 1, &dev));
  int n = 0;
  for (size_t count = 1024; count <= kMax; count *= 16) {
    for (int it = 0; it < 5; ++it) {
      for (ncclComm_t c : comms) {
        CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, c, stream));
        CHECK_NCCL(ncclAllGather(send, recv, count, ncclFloat32, c, stream));
        CHECK_NCCL(ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, c, stream));
        CHECK_NCCL(ncclBroadcast(send, recv, count, ncclFloat32, 0, c, stream));
        n += 4;
      }
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (ncclComm_t c : comms) CHECK_NCCL(ncclCommDestroy(c));
  std::printf("issued %d collectives\n", n);
  return 0;
}
