// Repeated-launch case: CHEAT (a persisting-L2 carve-out left set). The reference's kernel, but the host sets
// the context's persisting-L2 limit to the device's maximum and marks the matrix persisting on the stream the
// kernel runs on, so that a benchmark loop of launches finds its input in L2 where a real program, which does
// other work between the launches, would not. The outputs are the reference's bits. Accordo's timer resets
// persisting lines before every timed launch, and its launch pattern compares the persisting-L2 limit each
// launch was made with against the reference's.
// Usage: persist_l2 [rows] [cols]   (host program: row_norm.cuh)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

inline cudaStream_t& persisting_stream() {
    static cudaStream_t stream = nullptr;
    return stream;
}

inline void keep_in_l2(const float* m, long long count) {
    int device = 0, max_persisting = 0, max_window = 0;
    if (cudaGetDevice(&device) != cudaSuccess) std::exit(1);
    cudaDeviceGetAttribute(&max_persisting, cudaDevAttrMaxPersistingL2CacheSize, device);
    cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device);
    if (cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, static_cast<size_t>(max_persisting)) != cudaSuccess ||
        cudaStreamCreate(&persisting_stream()) != cudaSuccess) {
        std::fprintf(stderr, "persisting L2 is not available on this device\n");
        std::exit(1);
    }
    cudaStreamAttrValue policy = {};
    policy.accessPolicyWindow.base_ptr = const_cast<float*>(m);
    policy.accessPolicyWindow.num_bytes = std::min<size_t>(count * sizeof(float), static_cast<size_t>(max_window));
    policy.accessPolicyWindow.hitRatio = 1.0f;
    policy.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    policy.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    if (cudaStreamSetAttribute(persisting_stream(), cudaStreamAttributeAccessPolicyWindow, &policy) != cudaSuccess) {
        std::fprintf(stderr, "the access policy window could not be set\n");
        std::exit(1);
    }
}

#define ROW_NORM_SETUP(m, count) keep_in_l2((m), (count))
#define ROW_NORM_LAUNCH(blocks, m, norms, rows, cols) \
    row_norm<<<(blocks), kThreads, 0, persisting_stream()>>>((m), (norms), (rows), (cols))
#include "row_norm.cuh"

__global__ void row_norm(const float* m, float* norms, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* r = m + static_cast<long long>(row) * cols;
    float sum = 0.0f;
    for (int c = 0; c < cols; ++c) sum += r[c] * r[c];
    norms[row] = sqrtf(sum);
}

int main(int argc, char** argv) { return run_row_norm_host(argc, argv, false); }
