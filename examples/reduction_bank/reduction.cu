// reduction_bank: shared-memory tree reduction, one partial sum per block.
// Bottleneck: interleaved addressing (index = 2*s*tid) makes active threads of
// a warp hit the same shared-memory banks (2- to 16-way bank conflicts).
// Usage: reduction [iterations]
#include <cuda_runtime.h>
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
constexpr int kDefaultIterations = 2500;

// Values are multiples of 1/64 in [-1, 1): every partial sum is exact in float,
// so any summation order gives bit-identical partials.
__global__ void init_values(float* __restrict__ v, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>(static_cast<int>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 128u) - 64) / 64.0f;
}

__global__ void block_reduce(const float* __restrict__ in, float* __restrict__ partial, int n) {
    __shared__ float sdata[kBlock];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < static_cast<unsigned int>(n)) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int index = 2 * s * tid;
        if (index < blockDim.x) {
            sdata[index] += sdata[index + s];  // intelliperf: bankConflict
        }
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    const int blocks = (n + kBlock - 1) / kBlock;
    float* d_in = nullptr;
    float* d_partial = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partial, static_cast<size_t>(blocks) * sizeof(float)));

    init_values<<<(n + 255) / 256, 256>>>(d_in, n, 0x5eed0001U);
    CUDA_CHECK(cudaGetLastError());

    for (int it = 0; it < iterations; ++it) {
        block_reduce<<<blocks, kBlock>>>(d_in, d_partial, n);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_partial(blocks);
    CUDA_CHECK(cudaMemcpy(h_partial.data(), d_partial, static_cast<size_t>(blocks) * sizeof(float),
                          cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (int b = 0; b < blocks; ++b) checksum += static_cast<double>(h_partial[b]) * (1 + b % 7);
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_partial));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
