// Accordo validation case: hang (expected verdict: fail, timeout).
// BUG: every block of the first launch spins forever on a volatile device flag
// that nobody ever sets; the validator must kill it on its timeout.
// Usage: hang [n]   (host program: common.cuh)
#include "common.cuh"

__device__ volatile int g_release = 0;  // never set by anyone

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float sdata[kBlock];
    if (threadIdx.x == 0) {
        while (g_release == 0) {
            // BUG: spins forever (the first launch never finishes)
        }
    }
    __syncthreads();
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
