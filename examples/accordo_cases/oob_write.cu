// Accordo validation case: oob_write (expected verdict: fail, untouched_modified).
// BUG: the last block also writes partial[gridDim.x], one element past the
// partial sums.  It lands in the kSpare floats of the same allocation: bytes
// the reference never writes (they stay 0 there).
// Usage: oob_write [n]   (host program: common.cuh)
#include "common.cuh"

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float sdata[kBlock];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < static_cast<unsigned int>(n)) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = sdata[0];
        if (blockIdx.x == gridDim.x - 1) {
            partial[gridDim.x] = sdata[0] + 1.0f;  // BUG: one past the end (nonzero)
        }
    }
}

int main(int argc, char** argv) { return run_block_sum_host(argc, argv); }
