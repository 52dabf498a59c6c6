// Float-sum case: tree (correct). A shared-memory tree per block, one atomicAdd per block.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float total = block_tree_sum(i < n ? in[i] : 0.0f);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
