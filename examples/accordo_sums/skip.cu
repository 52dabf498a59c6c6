// Float-sum case: skip (WRONG: mismatch). The gridstride case, but its loop skips one element in
// every 4096 (an off-by-one in a hand-unrolled loop would do the same).
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (i % 4096 != 4095) acc += in[i];  // BUG
  }
  const float total = block_tree_sum(acc);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) { sum<<<1024, kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
