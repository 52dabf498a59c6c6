// strided_copy: element-wise copy of 16M floats with a permuted thread->element map.
// Bottleneck: thread t handles element (t % S) * (N / S) + t / S, so the 32
// threads of a warp touch 32 addresses N/S floats apart: every load and store
// request needs 32 separate sectors (uncoalesced global memory access).
// Usage: strided_copy [iterations]
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
constexpr int kN = 1 << 24;      // must be a multiple of kStride
constexpr int kStride = 32;      // S
constexpr int kDefaultIterations = 800;

__global__ void init_values(float* __restrict__ v, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 100003u) * 1.0e-4f - 5.0f;
}

// n must be a multiple of stride; the map t -> j is a permutation of [0, n).
__global__ void copy_elements(const float* __restrict__ in, float* __restrict__ out, int n, int stride) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) {
        int j = (t % stride) * (n / stride) + t / stride;
        float v = in[j];  // intelliperf: memoryAccess
        out[j] = v;
    }
}

int main(int argc, char** argv) {
    const int iterations = parse_iterations(argc, argv, kDefaultIterations);
    const int n = kN;
    static_assert(kN % kStride == 0, "N must be a multiple of the stride");
    float* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, static_cast<size_t>(n) * sizeof(float)));

    init_values<<<(n + 255) / 256, 256>>>(d_in, n, 0x5eed0004U);
    CUDA_CHECK(cudaGetLastError());

    const int blocks = (n + kBlock - 1) / kBlock;
    for (int it = 0; it < iterations; ++it) {
        copy_elements<<<blocks, kBlock>>>(d_in, d_out, n, kStride);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_out(n);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (int i = 0; i < n; ++i) checksum += static_cast<double>(h_out[i]) * (1 + i % 11);
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
