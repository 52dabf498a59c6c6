// vertical_stencil: a 25-tap vertical box blur of a 8192x4096 float image.
// Bottleneck: each thread computes one output and reads its 25 input rows from global memory,
// so every input element is fetched 25 times by 25 different blocks. The loads are coalesced,
// but the reuse happens in L2 (the blocks that share rows run on different SMs): L2 moves 25x
// the image for each pass (poor memory locality). Usage: vertical_stencil [iterations]
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s:%d: CUDA error: %s (%s)\n", __FILE__, __LINE__,      \
                         cudaGetErrorString(err_), #call);                                \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

constexpr int kWidth = 8192;
constexpr int kHeight = 4096;
constexpr int kRadius = 12;
constexpr int kBlock = 128;
constexpr int kDefaultIterations = 5;

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

__global__ void blur_columns(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    int x = blockIdx.x * kBlock + threadIdx.x;
    int y = blockIdx.y;
    float acc = 0.0f;
    for (int dy = -kRadius; dy <= kRadius; ++dy) {
        int row = min(max(y + dy, 0), height - 1);
        acc += in[static_cast<size_t>(row) * width + x];  // intelliperf: memoryLocality
    }
    out[static_cast<size_t>(y) * width + x] = acc * (1.0f / (2 * kRadius + 1));
}

static void blur(const float* in, float* out) {
    blur_columns<<<dim3(kWidth / kBlock, kHeight), kBlock>>>(in, out, kWidth, kHeight);
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    const size_t n = static_cast<size_t>(kWidth) * kHeight;
    float *in = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, n * sizeof(float)));
    init_values<<<(n + 255) / 256, 256>>>(in, static_cast<int>(n));
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        blur(in, out);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    float probe = 0.0f;
    CUDA_CHECK(cudaMemcpy(&probe, out + n / 3, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("checksum: out[n/3] = %.6f\n", probe);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    return 0;
}
