// Float-sum case: nobarrier (WRONG: mismatch, a race). The tree case without the barriers between
// its steps: a thread may add a partial sum its neighbour has not finished.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  __shared__ float partial[kBlock];
  const unsigned int t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  partial[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] += partial[t + s];  // BUG: no __syncthreads() after each step
  }
  if (t == 0) atomicAdd(out, partial[0]);
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
