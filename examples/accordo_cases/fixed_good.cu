// Accordo validation case: fixed_good (expected verdict: pass).
// A different but correct block_sum: shared-memory tree down to 32 values,
// then warp shuffles (same pairing order as ref, so the sums are bit-identical).
// Usage: fixed_good [n]   (host program: common.cuh)
#include "common.cuh"

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float sdata[kBlock];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < static_cast<unsigned int>(n)) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s >= 32; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid < 32) {
        float v = sdata[tid];
        for (int offset = 16; offset > 0; offset >>= 1) {
            v += __shfl_down_sync(0xffffffffu, v, offset);
        }
        if (tid == 0) sdata[0] = v;
    }
    if (tid == 0) {
        partial[blockIdx.x] = sdata[0];
    }
}

int main(int argc, char** argv) { return run_block_sum_host(argc, argv); }
