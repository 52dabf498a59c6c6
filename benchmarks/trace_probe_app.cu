// Probe application for benchmarks/trace_overhead.py: timestamps (steady_clock = CLOCK_MONOTONIC) the
// phases in which a CUPTI tracer can add time -- CUDA initialization and context creation (where the
// injection library is loaded and CUPTI sets up), the first allocation, the first launch (module load),
// a loop of small launches -- and prints them as one JSON line on stdout. The parent process adds the
// spawn and the exit.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    const cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                    \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

__global__ void scale(float* x, int n, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + 1.0f;
}

static unsigned long long now() {
  return static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::steady_clock::now().time_since_epoch())
                                             .count());
}

int main() {
  const unsigned long long t_main = now();
  CHECK(cudaFree(nullptr));  // cuInit (the injection library loads here) and the primary context
  const unsigned long long t_ctx = now();
  const int n = 1 << 24;
  float* x = nullptr;
  CHECK(cudaMalloc(&x, sizeof(float) * n));
  CHECK(cudaMemset(x, 0, sizeof(float) * n));
  CHECK(cudaDeviceSynchronize());
  const unsigned long long t_alloc = now();
  scale<<<(n + 255) / 256, 256>>>(x, n, 0.5f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const unsigned long long t_first = now();
  for (int i = 0; i < 200; ++i) scale<<<(n + 255) / 256, 256>>>(x, n, 0.5f);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const unsigned long long t_loop = now();
  CHECK(cudaFree(x));
  const unsigned long long t_end = now();
  std::printf("{\"main\":%llu,\"ctx\":%llu,\"alloc\":%llu,\"first\":%llu,\"loop\":%llu,\"end\":%llu}\n", t_main,
              t_ctx, t_alloc, t_first, t_loop, t_end);
  return 0;
}
