// work_queue: a persistent kernel whose threads take work items from a global queue counter.
// Bottleneck: every item is claimed with `item = atomicAdd(&g_next, 1)` whose old value is used
// (compiled to ATOMG, one per warp after nvcc's warp aggregation): 16M claims on one address,
// serialized in one L2 slice. Usage: work_queue [iterations]
#include <cuda_runtime.h>
#include <cstdint>
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

constexpr int kN = 1 << 24;  // a multiple of 32: every warp takes whole chunks
constexpr int kBlock = 256;
constexpr int kBlocksPerSm = 8;
constexpr int kDefaultIterations = 5;

__device__ unsigned int g_next;  // the queue: index of the next unclaimed item

__global__ void init_values(float* v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] = static_cast<float>((i * 2654435761u) % 1000u) * 0.001f;
}

// Each thread claims one item at a time until the queue is empty.
__global__ void process_items(const float* __restrict__ in, float* __restrict__ out,
                              int n) {
    while (true) {
        unsigned int item = atomicAdd(&g_next, 1u);  // intelliperf: atomicContention
        if (item >= static_cast<unsigned int>(n)) break;
        float x = in[item];
        out[item] = x * x + 0.5f * x + 1.0f;
    }
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    float *in = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, kN * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&out, kN * sizeof(float)));
    init_values<<<(kN + 255) / 256, 256>>>(in, kN);
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        const unsigned int zero = 0;
        CUDA_CHECK(cudaMemcpyToSymbolAsync(g_next, &zero, sizeof(zero)));
        process_items<<<sms * kBlocksPerSm, kBlock>>>(in, out, kN);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    float probe = 0.0f;
    unsigned int claimed = 0;
    CUDA_CHECK(cudaMemcpy(&probe, out + kN / 3, sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpyFromSymbol(&claimed, g_next, sizeof(claimed)));
    std::printf("checksum: out[n/3] = %.6f, claims = %u\n", probe, claimed);
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    return 0;
}
