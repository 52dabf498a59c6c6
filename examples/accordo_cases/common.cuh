// Shared host program of the Accordo validation cases.
// Every case defines block_sum(const float* in, float* partial, int n) and calls
// run_block_sum_host() from main(). The host launches block_sum kLaunches times,
// each time on freshly generated input of a different length n (never a multiple
// of the block size, so there is always a partial tail block), zeroing
// `partial` (which has kSpare spare floats) before each launch.
// Usage: <case> [n]   (n: length of the first launch, default 1048653; launch k
//                      uses n - 1000*k; n must leave every launch at least 1 element)
#pragma once
#include <cuda_runtime.h>
#include <csignal>
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

constexpr int kBlock = 256;
constexpr int kLaunches = 5;
constexpr int kDefaultN = (1 << 20) + 77;  // residues mod 256: 77, 101, 125, 149, 173
constexpr int kStep = 1000;
constexpr int kSpare = 64;  // spare floats after the partial sums, as real apps allocate

__global__ void block_sum(const float* in, float* partial, int n);

// What a broken host does differently from the reference's.
struct HostBugs {
    int fewer_launches = 0;      // launch block_sum this many times fewer
    bool drop_tail = false;      // grid of n / kBlock blocks (rounded down)
    bool crash_after_first = false;  // raise SIGSEGV after the first launch
};

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// Values are multiples of 1/64 in [0, 1): block sums are exact in float (any
// summation order gives the same bits) but NOT exact in half precision.
__global__ void fill_input(float* in, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) in[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 64u) / 64.0f;
}

inline int parse_n(int argc, char** argv) {
    if (argc <= 1) return kDefaultN;
    const long n = std::strtol(argv[1], nullptr, 10);
    if (n <= static_cast<long>(kStep) * (kLaunches - 1) || n > (1L << 30)) {
        std::fprintf(stderr, "usage: %s [n > %d]\n", argv[0], kStep * (kLaunches - 1));
        std::exit(2);
    }
    return static_cast<int>(n);
}

inline int run_block_sum_host(int argc, char** argv, const HostBugs& bugs = {}) {
    const int first_n = parse_n(argc, argv);
    const int max_blocks = (first_n + kBlock - 1) / kBlock;
    const size_t partial_floats = static_cast<size_t>(max_blocks) + kSpare;
    float* d_in = nullptr;
    float* d_partial = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(first_n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partial, partial_floats * sizeof(float)));

    std::vector<float> h_partial(max_blocks);
    double checksum = 0.0;
    const int launches = kLaunches - bugs.fewer_launches;
    for (int k = 0; k < launches; ++k) {
        const int n = first_n - k * kStep;
        const int blocks = bugs.drop_tail ? n / kBlock : (n + kBlock - 1) / kBlock;
        fill_input<<<(n + 255) / 256, 256>>>(d_in, n, 0xacc0d000U + static_cast<uint32_t>(k));
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemset(d_partial, 0, partial_floats * sizeof(float)));

        block_sum<<<blocks, kBlock>>>(d_in, d_partial, n);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
        if (bugs.crash_after_first) std::raise(SIGSEGV);

        const int expected_blocks = (n + kBlock - 1) / kBlock;
        CUDA_CHECK(cudaMemcpy(h_partial.data(), d_partial, static_cast<size_t>(expected_blocks) * sizeof(float),
                              cudaMemcpyDeviceToHost));
        for (int b = 0; b < expected_blocks; ++b) {
            checksum += static_cast<double>(h_partial[b]) * (1 + b % 7) * (k + 1);
        }
    }
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_partial));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
