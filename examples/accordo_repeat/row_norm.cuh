// Shared host program of the repeated-launch cases: a kernel launched again and again on one output, as a
// benchmark loop, a solver's step or a training loop does.
// Every case defines row_norm(const float* m, float* norms, int rows, int cols) and calls run_row_norm_host()
// from main(). The host fills an rows x cols matrix once and launches row_norm kLaunches times, each time
// writing every row's Euclidean norm into the same `norms` buffer, which it never clears: from the second
// launch on the kernel rewrites values its earlier launch wrote (the same bits, for the reference).
// A case may define ROW_NORM_SETUP(m, count) (a host step once the matrix is filled) and
// ROW_NORM_LAUNCH(blocks, m, norms, rows, cols) (how each launch is made; default: row_norm on the default
// stream) before including this file.
// Usage: <case> [rows] [cols]   (default 8192 x 1000)
#pragma once
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

#ifndef ROW_NORM_SETUP
#define ROW_NORM_SETUP(m, count)
#endif
#ifndef ROW_NORM_LAUNCH
#define ROW_NORM_LAUNCH(blocks, m, norms, rows, cols) row_norm<<<(blocks), kThreads>>>(m, norms, rows, cols)
#endif

constexpr int kLaunches = 10;
constexpr int kThreads = 256;

__global__ void row_norm(const float* m, float* norms, int rows, int cols);

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// Values in [-1, 1) with 24 bits of fraction: sums of their squares round differently in every order.
__global__ void fill_matrix(float* m, long long count) {
    long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) m[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(i)) >> 8) / 8388608.0f - 1.0f;
}

inline int positive_arg(int argc, char** argv, int index, int fallback) {
    if (argc <= index) return fallback;
    const long value = std::strtol(argv[index], nullptr, 10);
    if (value <= 0 || value > (1 << 20)) {
        std::fprintf(stderr, "usage: %s [rows] [cols] (each 1 .. 1048576)\n", argv[0]);
        std::exit(2);
    }
    return static_cast<int>(value);
}

// Launches row_norm kLaunches times; a kernel that needs one warp per row gets rows warps.
inline int run_row_norm_host(int argc, char** argv, bool warp_per_row) {
    const int rows = positive_arg(argc, argv, 1, 8192);
    const int cols = positive_arg(argc, argv, 2, 1000);
    const long long count = static_cast<long long>(rows) * cols;
    float* m = nullptr;
    float* norms = nullptr;
    CUDA_CHECK(cudaMalloc(&m, count * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&norms, rows * sizeof(float)));
    CUDA_CHECK(cudaMemset(norms, 0, rows * sizeof(float)));
    fill_matrix<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads>>>(m, count);
    CUDA_CHECK(cudaGetLastError());
    ROW_NORM_SETUP(m, count);
    const long long threads = warp_per_row ? 32LL * rows : rows;
    const unsigned blocks = static_cast<unsigned>((threads + kThreads - 1) / kThreads);
    for (int launch = 0; launch < kLaunches; ++launch) {
        ROW_NORM_LAUNCH(blocks, m, norms, rows, cols);
        CUDA_CHECK(cudaGetLastError());
#ifdef ROW_NORM_AFTER_LAUNCH
        ROW_NORM_AFTER_LAUNCH(norms);  // a case's own host step after each launch
#endif
    }
    std::vector<float> host(rows);
    CUDA_CHECK(cudaMemcpy(host.data(), norms, rows * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0;
    for (float v : host) checksum += v;
    std::printf("checksum: %.6f\n", checksum);
    CUDA_CHECK(cudaFree(m));
    CUDA_CHECK(cudaFree(norms));
    return 0;
}
