// small_grid: normalizes each row of a 64 x 512K float matrix with its row's mean and 1/std.
// Bottleneck: one block per row, so the grid is 64 blocks of 256 threads: fewer blocks than the GPU
// has SMs (132 on an H100/H200), 8 warps on each busy SM out of 64, and each thread walks its row
// 256 elements at a time with a load it must wait for. Too few loads are in flight to keep DRAM busy
// (low occupancy: the grid is far smaller than one wave). Usage: normalize_rows [iterations]
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CUDA_CHECK(call)                                                                  \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s:%d: CUDA error: %s (%s)\n", __FILE__, __LINE__,      \
                         cudaGetErrorString(err_), #call);                                \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

constexpr int kRows = 64;
constexpr int kCols = 1 << 19;
constexpr int kBlock = 256;
constexpr int kProbe = 2048;  // outputs checked per row
constexpr int kDefaultIterations = 20;

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

__global__ void init_stats(float* mean, float* inv_std, int rows) {
    int r = threadIdx.x;
    if (r < rows) {
        mean[r] = 0.25f + 0.0078125f * r;
        inv_std[r] = 1.5f + 0.125f * r;
    }
}

// Block b normalizes row b: its 256 threads step through the row's 512K elements together.
__global__ void normalize_rows(const float* __restrict__ in, const float* __restrict__ mean,  // intelliperf: occupancy
                               const float* __restrict__ inv_std, float* __restrict__ out, int cols) {
    const int row = blockIdx.x;
    const float m = mean[row];
    const float s = inv_std[row];
    const size_t base = static_cast<size_t>(row) * cols;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[base + c] = (in[base + c] - m) * s;
}

// Checks kProbe outputs of every row against (in - mean) * inv_std computed here from the buffers the
// kernel read; their sum is the checksum. False when one differs.
static bool check(const float* in, const float* mean, const float* inv_std, const float* out, double& sum) {
    std::vector<float> m(kRows), s(kRows), x(kProbe), y(kProbe);
    CUDA_CHECK(cudaMemcpy(m.data(), mean, kRows * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(s.data(), inv_std, kRows * sizeof(float), cudaMemcpyDeviceToHost));
    sum = 0.0;
    for (int r = 0; r < kRows; ++r) {
        const size_t at = static_cast<size_t>(r) * kCols + static_cast<size_t>(r * 7919 % (kCols / kProbe)) * kProbe;
        CUDA_CHECK(cudaMemcpy(x.data(), in + at, kProbe * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(y.data(), out + at, kProbe * sizeof(float), cudaMemcpyDeviceToHost));
        for (int k = 0; k < kProbe; ++k) {
            if (y[k] != (x[k] - m[r]) * s[r]) {
                std::fprintf(stderr, "self-check failed: out[%zu] = %.9g, expected %.9g\n", at + k, y[k],
                             (x[k] - m[r]) * s[r]);
                return false;
            }
            sum += y[k];
        }
    }
    return true;
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    const int n = kRows * kCols;
    float *in = nullptr, *mean = nullptr, *inv_std = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&mean, kRows * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&inv_std, kRows * sizeof(float)));
    init_values<<<(n + 255) / 256, 256>>>(in, n);
    CUDA_CHECK(cudaGetLastError());
    init_stats<<<1, kRows>>>(mean, inv_std, kRows);
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        normalize_rows<<<kRows, kBlock>>>(in, mean, inv_std, out, kCols);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    double sum = 0.0;
    if (!check(in, mean, inv_std, out, sum)) return 1;
    std::printf("checksum: %.4f\n", sum);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(mean));
    CUDA_CHECK(cudaFree(inv_std));
    return 0;
}
