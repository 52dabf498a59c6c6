// Float-sum case: zeroinput (WRONG: input_modified). The tree case, correct sum, but each thread
// zeroes its element of the const input after reading it.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float value = i < n ? in[i] : 0.0f;
  const float total = block_tree_sum(value);
  if (i < n) const_cast<float*>(in)[i] = 0.0f;  // BUG: writes the input
  if (threadIdx.x == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
