// register_spill: each thread mixes 40 values for 32 rounds (a small state-space filter).
// Fixed: __launch_bounds__(256) leaves the register count to the compiler, which keeps all
// 40 values in registers (fewer blocks per SM, no local memory). Usage: register_spill_fixed [iterations]
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


constexpr int kN = 1 << 20;  // threads; the input holds kState values per thread
constexpr int kBlock = 256;
constexpr int kState = 40;
constexpr int kRounds = 32;
constexpr int kDefaultIterations = 5;

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

__global__ void __launch_bounds__(kBlock) mix_state(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float state[kState];
#pragma unroll
    for (int k = 0; k < kState; ++k) state[k] = in[static_cast<size_t>(k) * n + i];
    for (int round = 0; round < kRounds; ++round) {
#pragma unroll
        for (int k = 0; k < kState; ++k) {
            state[k] = fmaf(state[k], 0.999f, state[(k + 7) % kState] * 0.001f);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kState; ++k) sum += state[k];
    out[i] = sum;
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    float *in = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, static_cast<size_t>(kState) * kN * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, kN * sizeof(float)));
    init_values<<<(kState * kN + 255) / 256, 256>>>(in, kState * kN);
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        mix_state<<<(kN + kBlock - 1) / kBlock, kBlock>>>(in, out, kN);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    float probe = 0.0f;
    CUDA_CHECK(cudaMemcpy(&probe, out + kN / 3, sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("checksum: out[n/3] = %.6f\n", probe);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    return 0;
}
