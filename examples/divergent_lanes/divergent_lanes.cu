// divergent_lanes: a per-element transform whose work depends on the element's parity.
// Bottleneck: thread i handles element i, so odd and even lanes of every warp take different
// branches with long loops; the warp runs both paths one after the other with half its lanes
// idle (branch divergence). Usage: divergent_lanes [iterations]
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

constexpr int kN = 1 << 22;  // a multiple of 64
constexpr int kBlock = 256;
constexpr int kSteps = 256;
constexpr int kDefaultIterations = 5;

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

__device__ __forceinline__ float transform(float x, int i) {
    if (i & 1) {
        for (int k = 0; k < kSteps; ++k) x = fmaf(x, 0.999f, 0.001f);
    } else {
        for (int k = 0; k < kSteps; ++k) x = __sinf(x) * 0.5f + x * 0.25f + 0.125f;  // intelliperf: branchDivergence
    }
    return x;
}

__global__ void transform_elements(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = transform(in[i], i);
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    float *in = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, kN * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, kN * sizeof(float)));
    init_values<<<(kN + 255) / 256, 256>>>(in, kN);
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        transform_elements<<<(kN + kBlock - 1) / kBlock, kBlock>>>(in, out, kN);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    float probe[2] = {0.0f, 0.0f};
    CUDA_CHECK(cudaMemcpy(probe, out + kN / 3, sizeof(probe), cudaMemcpyDeviceToHost));
    std::printf("checksum: out[n/3] = %.6f, out[n/3+1] = %.6f\n", probe[0], probe[1]);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    return 0;
}
