// Accordo validation case: overwrite_input (expected verdict: fail, input_modified).
// BUG: zeroes each input element after reading it.  The partial sums are
// still correct (the host regenerates the input before every launch), but
// the input buffer, which the kernel should only read, is modified.
// Usage: overwrite_input [n]   (host program: common.cuh)
#include "common.cuh"

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float sdata[kBlock];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < static_cast<unsigned int>(n)) ? in[i] : 0.0f;
    if (i < static_cast<unsigned int>(n)) {
        const_cast<float*>(in)[i] = 0.0f;  // BUG: overwrites its input
    }
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
