// Float-sum case: half (WRONG: mismatch, a precision downgrade). The tree case accumulating each
// block's sum in __half.
#include <cuda_fp16.h>

#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  __shared__ __half partial[kBlock];
  const unsigned int t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  partial[t] = __float2half(i < n ? in[i] : 0.0f);
  __syncthreads();
  for (unsigned int s = kBlock / 2; s > 0; s >>= 1) {
    if (t < s) partial[t] = __hadd(partial[t], partial[t + s]);
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, __half2float(partial[0]));
}

void launch_sum(const float* in, float* out, int n) { sum<<<blocks_for(n), kBlock>>>(in, out, n); }

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
