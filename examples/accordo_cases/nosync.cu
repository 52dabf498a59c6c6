// Accordo validation case: nosync (expected verdict: fail, mismatch).
// BUG: the __syncthreads() inside the tree loop is missing, so warps read
// shared-memory values other warps have not written yet (data race: wrong partials).
// Usage: nosync [n]   (host program: common.cuh)
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
        // BUG: missing __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = sdata[0];
    }
}

int main(int argc, char** argv) { return run_block_sum_host(argc, argv); }
