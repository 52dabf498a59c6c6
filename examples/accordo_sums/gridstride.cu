// Float-sum case: gridstride (correct, another launch shape). 1024 blocks of 256 threads; each thread
// adds every 262144th element in a register, then a block tree and one atomicAdd per block.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
  const float total = block_tree_sum(acc);
  if (threadIdx.x == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) { sum<<<1024, kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
