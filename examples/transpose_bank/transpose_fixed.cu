// transpose_bank: 32x32 shared-memory tile transpose of a 4096x4096 float matrix.
// Fixed: the tile is padded to 33 columns so the column-wise read hits 32
// different banks (no bank conflicts).
// Usage: transpose_fixed [iterations]
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

constexpr int kTile = 32;
constexpr int kBlockRows = 8;
constexpr int kWidth = 4096;
constexpr int kHeight = 4096;
constexpr int kDefaultIterations = 2000;

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__global__ void init_matrix(float* __restrict__ m, size_t count, uint32_t seed) {
    size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count) {
        m[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 2001u) * 1.0e-3f - 1.0f;
    }
}

// in: height rows x width columns; out = in^T: width rows x height columns.
__global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out,
                                int width, int height) {
    __shared__ float tile[kTile][kTile + 1];  // +1 padding: no bank conflicts

    int x = blockIdx.x * kTile + threadIdx.x;
    int y = blockIdx.y * kTile + threadIdx.y;
    for (int j = 0; j < kTile; j += kBlockRows) {
        if (x < width && y + j < height) {
            tile[threadIdx.y + j][threadIdx.x] = in[static_cast<size_t>(y + j) * width + x];
        }
    }
    __syncthreads();

    x = blockIdx.y * kTile + threadIdx.x;
    y = blockIdx.x * kTile + threadIdx.y;
    for (int j = 0; j < kTile; j += kBlockRows) {
        if (x < height && y + j < width) {
            float v = tile[threadIdx.x][threadIdx.y + j];
            out[static_cast<size_t>(y + j) * height + x] = v;
        }
    }
}

int main(int argc, char** argv) {
    int iterations = kDefaultIterations;
    if (argc > 1) {
        iterations = std::atoi(argv[1]);
        if (iterations <= 0) {
            std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
            return 2;
        }
    }
    const size_t count = static_cast<size_t>(kWidth) * kHeight;
    float* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, count * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_out, count * sizeof(float)));

    init_matrix<<<static_cast<unsigned>((count + 255) / 256), 256>>>(d_in, count, 0x1234abcdU);
    CUDA_CHECK(cudaGetLastError());

    dim3 block(kTile, kBlockRows);
    dim3 grid((kWidth + kTile - 1) / kTile, (kHeight + kTile - 1) / kTile);
    for (int it = 0; it < iterations; ++it) {
        transpose_tiled<<<grid, block>>>(d_in, d_out, kWidth, kHeight);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());

    std::vector<float> h_out(count);
    CUDA_CHECK(cudaMemcpy(h_out.data(), d_out, count * sizeof(float), cudaMemcpyDeviceToHost));
    double checksum = 0.0;
    for (size_t i = 0; i < count; ++i) {
        checksum += static_cast<double>(h_out[i]) * static_cast<double>(1 + i % 13);
    }
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
