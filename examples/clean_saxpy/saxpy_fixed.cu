// clean_saxpy: out = a * x + y over 16M floats (control example).
// Coalesced, vectorizable, memory-bound at full bandwidth: no bottleneck to
// fix.  saxpy_fixed.cu is an identical copy so every example has the same shape.
// Usage: saxpy [iterations]   (saxpy_fixed: same)
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
constexpr int kDefaultIterations = 3000;
constexpr float kA = 1.5f;

__global__ void init_values(float* __restrict__ x, float* __restrict__ y, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(2 * i) ^ seed) % 20001u) * 1.0e-4f - 1.0f;
        y[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(2 * i + 1) ^ seed) % 20001u) * 1.0e-4f - 1.0f;
    }
}

// out = a * x + y (writes a separate buffer, so every launch is idempotent).
__global__ void saxpy(int n, float a, const float* __restrict__ x, const float* __restrict__ y,
                      float* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * x[i] + y[i];
    }
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    float* d_x = nullptr;
    float* d_y = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_x, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_y, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, static_cast<size_t>(n) * sizeof(float)));

    init_values<<<(n + 255) / 256, 256>>>(d_x, d_y, n, 0x5eed0006U);
    CUDA_CHECK(cudaGetLastError());

    const int blocks = (n + kBlock - 1) / kBlock;
    for (int it = 0; it < iterations; ++it) {
        saxpy<<<blocks, kBlock>>>(n, kA, d_x, d_y, d_out);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_out(n);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (int i = 0; i < n; ++i) checksum += static_cast<double>(h_out[i]) * (1 + i % 11);
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_x));
    CUDA_CHECK(cudaFree(d_y));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
