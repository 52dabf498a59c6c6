// histogram_atomic: 8-bin histogram of 16M 32-bit keys.
// Bottleneck: every thread does a global atomicAdd on one of only 8 counters,
// so the atomics pile up on 8 addresses (atomic contention).
// Usage: histogram [iterations]
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
constexpr int kNumBins = 8;
constexpr int kN = 1 << 24;
constexpr int kDefaultIterations = 80;

__global__ void init_keys(unsigned int* __restrict__ keys, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) keys[i] = hash_u32(static_cast<uint32_t>(i) ^ seed);
}

__global__ void histogram_bins(const unsigned int* __restrict__ keys, unsigned int* __restrict__ hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int bin = keys[i] % kNumBins;
        atomicAdd(&hist[bin], 1u);  // intelliperf: atomicContention
    }
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    unsigned int* d_keys = nullptr;
    unsigned int* d_hist = nullptr;
    CUDA_CHECK(cudaMalloc(&d_keys, static_cast<size_t>(n) * sizeof(unsigned int)));
    CUDA_CHECK(cudaMalloc(&d_hist, kNumBins * sizeof(unsigned int)));

    init_keys<<<(n + 255) / 256, 256>>>(d_keys, n, 0x5eed0003U);
    CUDA_CHECK(cudaGetLastError());

    const int blocks = (n + kBlock - 1) / kBlock;  // one key per thread
    for (int it = 0; it < iterations; ++it) {
        CUDA_CHECK(cudaMemsetAsync(d_hist, 0, kNumBins * sizeof(unsigned int)));  // idempotent launches
        histogram_bins<<<blocks, kBlock>>>(d_keys, d_hist, n);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    unsigned int h_hist[kNumBins];
    CUDA_CHECK(cudaMemcpy(h_hist, d_hist, sizeof(h_hist), cudaMemcpyDeviceToHost));
    unsigned long long total = 0;
    unsigned long long checksum = 0;
    for (int b = 0; b < kNumBins; ++b) {
        total += h_hist[b];
        checksum += static_cast<unsigned long long>(h_hist[b]) * static_cast<unsigned long long>(b + 1);
    }
    if (total != static_cast<unsigned long long>(n)) {
        std::fprintf(stderr, "error: histogram counts %llu keys, expected %d\n", total, n);
        return 1;
    }
    std::printf("checksum: %llu\n", checksum);

    CUDA_CHECK(cudaFree(d_keys));
    CUDA_CHECK(cudaFree(d_hist));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
