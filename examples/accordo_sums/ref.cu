// Float-sum case: REFERENCE. One atomicAdd per element into *out: the order of the additions, and so
// the rounding of the result, changes from run to run. (host program: sums.cuh)
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, in[i]);
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
