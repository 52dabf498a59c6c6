// Accordo validation case: half_accum (expected verdict: fail, mismatch).
// BUG: accumulates in __half; block sums up to ~256 with 1/64 resolution do
// not fit an 11-bit significand, so partials differ beyond float tolerance.
// Usage: half_accum [n]   (host program: common.cuh)
#include <cuda_fp16.h>
#include "common.cuh"

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ __half sdata[kBlock];  // BUG: half-precision accumulator
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = __float2half((i < static_cast<unsigned int>(n)) ? in[i] : 0.0f);
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = __hadd(sdata[tid], sdata[tid + s]);
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = __half2float(sdata[0]);
    }
}

int main(int argc, char** argv) { return run_block_sum_host(argc, argv); }
