// GPU smoke program for libcollscope-cupti (gpu_smoke.sh runs it once per "rank" with the library
// injected). Each step launches a compute kernel 40 times and a small kernel 100 times; the rank
// named by SLOW_RANK spins its compute kernel SLOW_FACTOR times longer from step SLOW_FROM on.
// A spin kernel is used, not a GEMM, so that its duration is set by the program alone.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

__global__ void spin_compute(long long cycles, int* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && cycles < 0) *sink = 1;
}

__global__ void spin_small(long long cycles, int* sink) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && cycles < 0) *sink = 2;
}

static int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::atoi(v) : def;
}

int main() {
  const int rank = EnvInt("RANK", 0), slow_rank = EnvInt("SLOW_RANK", 2), slow_from = EnvInt("SLOW_FROM", 100);
  const int steps = EnvInt("STEPS", 400);
  const double factor = std::atof(std::getenv("SLOW_FACTOR") ? std::getenv("SLOW_FACTOR") : "1.4");
  int* sink = nullptr;
  if (cudaMalloc(&sink, sizeof(int)) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  const long long base = 100000;  // ~50 us at 2 GHz
  for (int s = 0; s < steps; ++s) {
    const long long c = rank == slow_rank && s >= slow_from ? static_cast<long long>(base * factor) : base;
    for (int i = 0; i < 40; ++i) spin_compute<<<132, 128>>>(c, sink);
    for (int i = 0; i < 100; ++i) spin_small<<<8, 128>>>(base / 20, sink);
    cudaDeviceSynchronize();
  }
  cudaFree(sink);
  std::printf("rank %d: %d steps done\n", rank, steps);
  return 0;
}
