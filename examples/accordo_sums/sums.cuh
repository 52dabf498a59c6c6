// Shared host program of the float-sum cases: one kernel, sum(const float* in, float* out, int n),
// adds n floats into *out. The reference (ref.cu) does it with one atomicAdd per element, so its
// result changes from run to run with the order the atomics land in; the other cases are rewrites of
// it, correct (other summation orders) or wrong. Each case defines sum() and launch_sum().
//
// Usage: <case> [n] [launches] [data]
//   n        elements (default 4194381 = 2^22 + 77, so a 256-thread grid has a partial tail block)
//   launches times the kernel is launched, each on a zeroed *out (default 1); the input is copied from
//            the host, so sum() is the first kernel the process launches
//   data     signed: uniform in [-1, 1) (the partial sums wander around 0; default)
//            drift:  uniform in [-1, 1) + 0.02 (the partial sums grow one way, so an atomicAdd chain
//                    carries a systematic rounding bias beside its run-to-run noise)
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: CUDA error: %s (%s)\n", __FILE__, __LINE__,                  \
                   cudaGetErrorString(err_), #call);                                            \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

constexpr int kBlock = 256;
constexpr int kDefaultN = (1 << 22) + 77;

__global__ void sum(const float* in, float* out, int n);
void launch_sum(const float* in, float* out, int n);  // the case's grid and block

inline uint32_t hash_u32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

inline int run_sum_host(int argc, char** argv) {
  const long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : kDefaultN;
  const long launches = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 1;
  const char* data = argc > 3 ? argv[3] : "signed";
  const bool drift = std::strcmp(data, "drift") == 0;
  if (n < 1 || n > (1L << 30) || launches < 1 || (!drift && std::strcmp(data, "signed") != 0)) {
    std::fprintf(stderr, "usage: %s [n >= 1] [launches >= 1] [signed|drift]\n", argv[0]);
    return 2;
  }
  std::vector<float> host(static_cast<size_t>(n));
  double exact = 0.0;
  for (long i = 0; i < n; ++i) {
    const double u = (hash_u32(static_cast<uint32_t>(i) * 2654435761u) >> 8) * (1.0 / 16777216.0);
    host[i] = static_cast<float>(2.0 * u - 1.0 + (drift ? 0.02 : 0.0));
    exact += host[i];
  }
  float* d_in = nullptr;
  float* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(n) * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, host.data(), static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice));
  float result = 0.0f;
  for (long k = 0; k < launches; ++k) {
    CUDA_CHECK(cudaMemset(d_out, 0, sizeof(float)));
    launch_sum(d_in, d_out, static_cast<int>(n));
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(&result, d_out, sizeof(float), cudaMemcpyDeviceToHost));
  }
  std::printf("sum: %.9g (exact %.9g)\n", result, exact);
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return 0;
}

// A block's sum of one value per thread (kBlock threads), in shared memory; thread 0 gets the total.
__device__ inline float block_tree_sum(float value) {
  __shared__ float partial[kBlock];
  const unsigned int t = threadIdx.x;
  partial[t] = value;
  __syncthreads();
  for (unsigned int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];
    __syncthreads();
  }
  return partial[0];
}

__device__ inline float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_down_sync(0xffffffffu, value, offset);
  return value;
}

inline int blocks_for(int n) { return (n + kBlock - 1) / kBlock; }
