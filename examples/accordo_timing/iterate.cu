// Speedup-accuracy case: a compute-bound kernel that is the first (and by default the only) kernel its
// process launches. Each thread iterates x = sin(x) * 0.999 + 0.001 `steps` times; iterate_fixed.cu
// uses the fast hardware sine (__sinf) instead of the accurate one, several times faster.
// Usage: iterate [launches] [n] [steps]   (defaults: 1 launch, n = 2^20, 2000 steps)
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#ifndef SINE
#define SINE sinf
#endif

#define CUDA_CHECK(call)                                                                        \
  do {                                                                                          \
    cudaError_t err_ = (call);                                                                  \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

__global__ void iterate(const float* in, float* out, int n, int steps) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  for (int s = 0; s < steps; ++s) x = SINE(x) * 0.999f + 0.001f;
  out[i] = x;
}

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 1;
  const int n = argc > 2 ? std::atoi(argv[2]) : 1 << 20;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 2000;
  if (launches < 1 || n < 1 || steps < 1) {
    std::fprintf(stderr, "usage: %s [launches >= 1] [n >= 1] [steps >= 1]\n", argv[0]);
    return 2;
  }
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 1e-3f;
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  for (int k = 0; k < launches; ++k) iterate<<<(n + 255) / 256, 256>>>(d_in, d_out, n, steps);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpy(host.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("out[n-1] = %.6f\n", host[n - 1]);
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  return 0;
}
