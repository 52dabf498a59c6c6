// Control for the atomic-contention formula: one atomicAdd per element, like atomic_reduction,
// but every thread adds into its own address (coalesced, no two threads share an address).
// Plenty of atomics, no contention: nothing should be flagged.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                    cudaGetErrorString(err_));                                        \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

__global__ void init_values(float* in, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int h = (unsigned int)i * 2654435761u + 12345u;
        in[i] = (float)(h % 1000u) * 0.001f + 0.5f;
    }
}

__global__ void accumulate(const float* in, float* out, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&out[i], in[i]);
    }
}

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? atoi(argv[1]) : 400;
    const size_t n = (size_t)1 << 26;
    const int block = 256;
    const unsigned int grid = (unsigned int)((n + block - 1) / block);
    float *in = nullptr, *out = nullptr;
    CHECK(cudaMalloc(&in, n * sizeof(float)));
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    init_values<<<grid, block>>>(in, n);
    CHECK(cudaGetLastError());
    CHECK(cudaMemset(out, 0, n * sizeof(float)));
    for (int it = 0; it < iterations; ++it) {
        accumulate<<<grid, block>>>(in, out, n);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaDeviceSynchronize());
    float* host = (float*)malloc(n * sizeof(float));
    if (!host) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    CHECK(cudaMemcpy(host, out, n * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += host[i];
    printf("checksum: %.6e\n", sum);
    free(host);
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
    return 0;
}
