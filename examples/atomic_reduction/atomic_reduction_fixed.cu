// atomic_reduction: sum of 16M floats into a single global accumulator.
// Fixed: block-level reduction (warp shuffles + shared memory) followed by a
// single atomicAdd per block.  Same kernel name, signature and output.
// Usage: atomic_reduction_fixed [iterations]
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_CHECK(call)                                                     \
    do {                                                                     \
        cudaError_t err_ = (call);                                           \
        if (err_ != cudaSuccess) {                                           \
            std::fprintf(stderr, "%s:%d: CUDA error: %s (%s)\n", __FILE__,   \
                         __LINE__, cudaGetErrorString(err_), #call);         \
            std::exit(1);                                                    \
        }                                                                    \
    } while (0)

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static int parse_iterations(int argc, char** argv, int default_iterations) {
    if (argc <= 1) return default_iterations;
    int iterations = std::atoi(argv[1]);
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        std::exit(2);
    }
    return iterations;
}

constexpr int kBlock = 256;
constexpr int kN = 1 << 24;
constexpr int kDefaultIterations = 8;

// Values are multiples of 1/4 in [-1, 1]: the running sums stay far below 2^22,
// so every partial sum is exact in float and any summation order gives the
// same bit-exact result.
__global__ void init_values(float* __restrict__ v, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>(static_cast<int>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 9u) - 4) * 0.25f;
}

// Fixed: each thread sums a grid-stride slice, then a warp-shuffle reduction and
// a shared-memory reduction across the block's warps, then ONE atomicAdd per
// block. The grid is capped (kMaxBlocks), so only ~1K atomics hit the single
// address instead of one per element (or even one per 256 elements).
constexpr int kMaxBlocks = 1024;

__global__ void atomic_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
    __shared__ float warp_sums[kBlock / 32];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        v += in[i];
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int num_warps = blockDim.x >> 5;
        v = (lane < num_warps) ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            v += __shfl_down_sync(0xffffffffu, v, offset);
        }
        if (lane == 0) atomicAdd(&out[0], v);
    }
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    float* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));

    init_values<<<(n + 255) / 256, 256>>>(d_in, n, 0x5eed0002U);
    CUDA_CHECK(cudaGetLastError());

    const int blocks = std::min((n + kBlock - 1) / kBlock, kMaxBlocks);
    for (int it = 0; it < iterations; ++it) {
        CUDA_CHECK(cudaMemsetAsync(d_out, 0, sizeof(float)));  // keep every launch idempotent
        atomic_sum<<<blocks, kBlock>>>(d_in, d_out, n);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    float h_out = 0.0f;
    CUDA_CHECK(cudaMemcpy(&h_out, d_out, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("checksum: %.6e\n", static_cast<double>(h_out));

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
