// Accordo validation case: REFERENCE.
// block_sum: shared-memory tree reduction (sequential addressing), one partial
// sum per block.  The host launches it kLaunches times, each time on freshly
// generated input of a different length n (never a multiple of the block size,
// so there is always a partial tail block).
// Usage: ref [n]   (host program: common.cuh)
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
    }
}

int main(int argc, char** argv) { return run_block_sum_host(argc, argv); }
