// row_stencil: a 25-tap horizontal box blur of a 8192x4096 float image.
// Fixed version: identical (a control has nothing to fix). Control for memoryLocality: every input element is read 25 times, like vertical_stencil, but by
// neighbouring lanes of the same warp, so the reuse is served by L1 and L2 moves the image about
// once. Nothing should be flagged. Usage: row_stencil [iterations]
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

__global__ void blur_rows(const float* __restrict__ in, float* __restrict__ out, int width, int height) {
    int x = blockIdx.x * kBlock + threadIdx.x;
    int y = blockIdx.y;
    const float* line = in + static_cast<size_t>(y) * width;
    float acc = 0.0f;
    for (int dx = -kRadius; dx <= kRadius; ++dx) {
        int column = min(max(x + dx, 0), width - 1);
        acc += line[column];
    }
    out[static_cast<size_t>(y) * width + x] = acc * (1.0f / (2 * kRadius + 1));
}

static void blur(const float* in, float* out) {
    blur_rows<<<dim3(kWidth / kBlock, kHeight), kBlock>>>(in, out, kWidth, kHeight);
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
