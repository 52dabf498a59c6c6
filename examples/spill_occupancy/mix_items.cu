// spill_occupancy: each thread mixes the 64 values of one item for 32 rounds (a small state-space
// filter, as in register_spill) and writes their sum; a grid-stride loop hands out the 256K items.
// Two bottlenecks that feed each other, and occupancy dominates: the kernel is launched as 64 blocks
// of one warp each (64 warps on the whole GPU: at most one per SM, 1/64 of its warp slots), and
// __launch_bounds__(32, 32) caps it at 64 registers while 64 values stay live, so part of the state
// spills to local memory every round. With one warp per SM nothing hides the spills' latency, nor
// the loads'. Fixing the spills alone (dropping the minimum-blocks argument) still leaves 64 warps
// doing all the work. Usage: mix_items [iterations]
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

constexpr int kN = 1 << 18;  // items; the input holds kState values per item
constexpr int kState = 64;
constexpr int kRounds = 32;
constexpr int kBlock = 32;   // one warp per block
constexpr int kBlocks = 64;
constexpr int kDefaultIterations = 5;

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

// The same mixing for every item, whatever the launch.
__device__ __forceinline__ float mix(const float* __restrict__ in, int i, int n) {
    float state[kState];
#pragma unroll
    for (int k = 0; k < kState; ++k) state[k] = in[static_cast<size_t>(k) * n + i];
    for (int round = 0; round < kRounds; ++round) {
#pragma unroll
        for (int k = 0; k < kState; ++k) state[k] = fmaf(state[k], 0.999f, state[(k + 7) % kState] * 0.001f);
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kState; ++k) sum += state[k];
    return sum;
}

__global__ void __launch_bounds__(kBlock, 32) mix_items(const float* __restrict__ in, float* __restrict__ out, int n) {  // intelliperf: occupancy
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = mix(in, i, n);
}

// Checks every 61st item against the same mixing done here on the input the kernel read; the sum of all
// outputs is the checksum. False when one differs.
static bool check(const float* d_in, const float* d_out, double& sum) {
    std::vector<float> in(static_cast<size_t>(kState) * kN), out(kN);
    CUDA_CHECK(cudaMemcpy(in.data(), d_in, in.size() * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; i += 61) {
        float state[kState];
        for (int k = 0; k < kState; ++k) state[k] = in[static_cast<size_t>(k) * kN + i];
        for (int round = 0; round < kRounds; ++round) {
            for (int k = 0; k < kState; ++k) state[k] = std::fmaf(state[k], 0.999f, state[(k + 7) % kState] * 0.001f);
        }
        float expected = 0.0f;
        for (int k = 0; k < kState; ++k) expected += state[k];
        if (out[i] != expected) {
            std::fprintf(stderr, "self-check failed: out[%d] = %.9g, expected %.9g\n", i, out[i], expected);
            return false;
        }
    }
    sum = 0.0;
    for (float v : out) sum += v;
    return true;
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
        mix_items<<<kBlocks, kBlock>>>(in, out, kN);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    double sum = 0.0;
    if (!check(in, out, sum)) return 1;
    std::printf("checksum: %.4f\n", sum);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    return 0;
}
