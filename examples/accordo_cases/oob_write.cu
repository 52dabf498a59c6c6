// Accordo validation case: oob_write (expected verdict: fail, untouched_modified).
// BUG: the last block also writes partial[gridDim.x], one element past the
// partial sums.  It lands in the kSpare floats of the same allocation: bytes
// the reference never writes (they stay 0 there).
// Everything else is identical to ref.cu.
// Usage: oob_write
#include <cuda_runtime.h>
#include <csignal>
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

constexpr int kBlock = 256;
constexpr int kLaunches = 5;
constexpr int kN = (1 << 20) + 77;  // launch k uses n = kN - k * kStep
constexpr int kStep = 1000;         // every n % kBlock != 0 (77, 101, 125, 149, 173)
constexpr int kSpare = 64;          // spare floats after the partial sums, as real apps allocate

__host__ __device__ inline uint32_t hash_u32(uint32_t x) {
    x ^= x >> 16; x *= 0x7feb352dU;
    x ^= x >> 15; x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// Values are multiples of 1/64 in [0, 1): block sums are exact in float (any
// summation order gives the same bits) but NOT exact in half precision.
__global__ void fill_input(float* in, int n, uint32_t seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) in[i] = static_cast<float>(hash_u32(static_cast<uint32_t>(i) ^ seed) % 64u) / 64.0f;
}

__global__ void block_sum(const float* in, float* partial, int n) {
    __shared__ float sdata[kBlock];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < static_cast<unsigned int>(n)) ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        partial[blockIdx.x] = sdata[0];
        if (blockIdx.x == gridDim.x - 1) {
            partial[gridDim.x] = sdata[0] + 1.0f;  // BUG: one past the end (nonzero)
        }
    }
}

int main() {
    const int max_blocks = (kN + kBlock - 1) / kBlock;
    const size_t partial_floats = static_cast<size_t>(max_blocks) + kSpare;
    float* d_in = nullptr;
    float* d_partial = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, static_cast<size_t>(kN) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_partial, partial_floats * sizeof(float)));

    std::vector<float> h_partial(max_blocks);
    double checksum = 0.0;
    const int launches = kLaunches;
    for (int k = 0; k < launches; ++k) {
        const int n = kN - k * kStep;
        const int blocks = (n + kBlock - 1) / kBlock;
        fill_input<<<(n + 255) / 256, 256>>>(d_in, n, 0xacc0d000U + static_cast<uint32_t>(k));
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaMemset(d_partial, 0, partial_floats * sizeof(float)));

        block_sum<<<blocks, kBlock>>>(d_in, d_partial, n);
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());

        const int expected_blocks = (n + kBlock - 1) / kBlock;
        CUDA_CHECK(cudaMemcpy(h_partial.data(), d_partial, static_cast<size_t>(expected_blocks) * sizeof(float),
                              cudaMemcpyDeviceToHost));
        for (int b = 0; b < expected_blocks; ++b) {
            checksum += static_cast<double>(h_partial[b]) * (1 + b % 7) * (k + 1);
        }
    }
    std::printf("checksum: %.6e\n", checksum);

    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_partial));
    CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
}
