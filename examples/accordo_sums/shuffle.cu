// Float-sum case: shuffle (correct). Warp shuffles, one atomicAdd per warp.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float total = warp_sum(i < n ? in[i] : 0.0f);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
