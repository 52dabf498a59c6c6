// library_sort: generates 32M keys with a small kernel of its own, then sorts them with CUB's
// radix sort (a library: its kernels come from the CUDA toolkit's headers, not from this project).
// Control: the sort takes most of the GPU time, but its kernels are not this project's to edit;
// the project's own kernel is coalesced and cheap. Nothing should be flagged, and CUB's kernels
// should be listed as library kernels, not profiled. Usage: library_sort [iterations]
#include <cub/device/device_radix_sort.cuh>
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

constexpr int kN = 1 << 25;
constexpr int kBlock = 256;
constexpr int kDefaultIterations = 3;

__global__ void make_keys(unsigned int* __restrict__ keys, int n, unsigned int seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int x = static_cast<unsigned int>(i) ^ seed;
        x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
        keys[i] = x;
    }
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    unsigned int *keys = nullptr, *sorted = nullptr;
    CUDA_CHECK(cudaMalloc(&keys, kN * sizeof(unsigned int)));
    CUDA_CHECK(cudaMalloc(&sorted, kN * sizeof(unsigned int)));
    size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, keys, sorted, kN));
    void* temp = nullptr;
    CUDA_CHECK(cudaMalloc(&temp, temp_bytes));
    for (int it = 0; it < iterations; ++it) {
        make_keys<<<(kN + kBlock - 1) / kBlock, kBlock>>>(keys, kN, 0x9e3779b9U + it);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp, temp_bytes, keys, sorted, kN));
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    unsigned int probe[2] = {0, 0};
    CUDA_CHECK(cudaMemcpy(probe, sorted + kN / 2, sizeof(probe), cudaMemcpyDeviceToHost));
    std::printf("checksum: sorted[n/2] = %u, sorted[n/2+1] = %u (%s)\n", probe[0], probe[1], probe[0] <= probe[1] ? "ordered" : "NOT ORDERED");
    CUDA_CHECK(cudaFree(temp));
    CUDA_CHECK(cudaFree(keys));
    CUDA_CHECK(cudaFree(sorted));
    return 0;
}
