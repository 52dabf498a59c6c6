// register_limited: each warp walks a linked list of 128 pages (256 bytes each, scattered over a 256 MB
// pool; a link table gives each page's successor) and sums them with a 128-entry weight table:
// lane l adds weights[s] * page_s[l] for the s-th page of its list.
// Fixed: each step reads its weight when it needs it (the same 512 bytes for every warp: an L1 hit,
// issued beside the step's page load) instead of holding the table in registers, so the kernel needs
// 32 registers and 8 blocks (64 warps) fit on an SM: eight times as many walks hide each other's
// latency. Same sums in the same order. Usage: walk_pages_fixed [iterations]
#include <cuda_runtime.h>
#include <cstdint>
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

constexpr int kLists = 8192;  // one per warp
constexpr int kSteps = 128;   // pages per list (a multiple of kWeights)
constexpr int kWeights = 128;
constexpr int kPages = kLists * kSteps;  // every page is on exactly one list
constexpr int kBlock = 256;
constexpr int kDefaultIterations = 5;

__global__ void init_pages(float2* pages, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        pages[i] = make_float2(static_cast<float>((2 * i * 2654435761u) % 1000u) * 0.001f,
                               static_cast<float>(((2 * i + 1) * 2654435761u) % 1000u) * 0.001f);
    }
}

__global__ void walk_pages(const float2* __restrict__ pages, const int* __restrict__ next,
                           const int* __restrict__ heads, const float* __restrict__ weights, float2* __restrict__ out,
                           int steps) {
    const int lane = threadIdx.x % 32;
    const int list = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int page = heads[list];
    float2 acc = make_float2(0.0f, 0.0f);
    for (int s = 0; s < steps; ++s) {
        const float w = weights[s % kWeights];  // read where it is used, not kept in registers
        const float2 v = pages[page * 32 + lane];
        acc.x = fmaf(w, v.x, acc.x);
        acc.y = fmaf(w, v.y, acc.y);
        page = next[page];
    }
    out[list * 32 + lane] = acc;
}

// The lists: a random order of all pages (a fixed seed), cut into kLists runs of kSteps.
static void make_lists(std::vector<int>& next, std::vector<int>& heads) {
    std::vector<int> order(kPages);
    for (int p = 0; p < kPages; ++p) order[p] = p;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int p = kPages - 1; p > 0; --p) {  // Fisher-Yates with xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const int q = static_cast<int>(x % static_cast<uint64_t>(p + 1));
        const int t = order[p];
        order[p] = order[q];
        order[q] = t;
    }
    next.assign(kPages, 0);
    heads.assign(kLists, 0);
    for (int j = 0; j < kPages; ++j) next[order[j]] = order[(j + 1) % kPages];
    for (int l = 0; l < kLists; ++l) heads[l] = order[l * kSteps];
}

// Recomputes every 64th list here from the buffers the kernel read; the sum of all outputs is the
// checksum. False when one output differs.
static bool check(const float2* d_pages, const int* d_next, const int* d_heads, const float* d_weights,
                  const float2* d_out, double& sum) {
    std::vector<float2> pages(static_cast<size_t>(kPages) * 32), out(kLists * 32);
    std::vector<int> next(kPages), heads(kLists);
    std::vector<float> weights(kWeights);
    CUDA_CHECK(cudaMemcpy(pages.data(), d_pages, pages.size() * sizeof(float2), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(next.data(), d_next, kPages * sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(heads.data(), d_heads, kLists * sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(weights.data(), d_weights, kWeights * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float2), cudaMemcpyDeviceToHost));
    for (int l = 0; l < kLists; l += 64) {
        for (int lane = 0; lane < 32; ++lane) {
            int page = heads[l];
            float ax = 0.0f, ay = 0.0f;
            for (int s = 0; s < kSteps; ++s) {
                const float2 v = pages[static_cast<size_t>(page) * 32 + lane];
                ax = std::fmaf(weights[s % kWeights], v.x, ax);
                ay = std::fmaf(weights[s % kWeights], v.y, ay);
                page = next[page];
            }
            const float2 got = out[l * 32 + lane];
            if (got.x != ax || got.y != ay) {
                std::fprintf(stderr, "self-check failed: list %d lane %d: (%.9g, %.9g), expected (%.9g, %.9g)\n",
                             l, lane, got.x, got.y, ax, ay);
                return false;
            }
        }
    }
    sum = 0.0;
    for (const float2& v : out) sum += static_cast<double>(v.x) + v.y;
    return true;
}

int main(int argc, char** argv) {
    int iterations = argc > 1 ? std::atoi(argv[1]) : kDefaultIterations;
    if (iterations <= 0) {
        std::fprintf(stderr, "usage: %s [iterations>0]\n", argv[0]);
        return 2;
    }
    std::vector<int> next, heads;
    make_lists(next, heads);
    std::vector<float> weights(kWeights);
    for (int k = 0; k < kWeights; ++k) weights[k] = 0.0625f * static_cast<float>(k % 16 + 1);
    float2 *pages = nullptr, *out = nullptr;
    int *d_next = nullptr, *d_heads = nullptr;
    float* d_weights = nullptr;
    CUDA_CHECK(cudaMalloc(&pages, static_cast<size_t>(kPages) * 32 * sizeof(float2)));
    CUDA_CHECK(cudaMalloc(&out, kLists * 32 * sizeof(float2)));
    CUDA_CHECK(cudaMalloc(&d_next, kPages * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_heads, kLists * sizeof(int)));
    CUDA_CHECK(cudaMalloc(&d_weights, kWeights * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d_next, next.data(), kPages * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_heads, heads.data(), kLists * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_weights, weights.data(), kWeights * sizeof(float), cudaMemcpyHostToDevice));
    init_pages<<<(kPages * 32 + 255) / 256, 256>>>(pages, kPages * 32);
    CUDA_CHECK(cudaGetLastError());
    for (int it = 0; it < iterations; ++it) {
        walk_pages<<<kLists * 32 / kBlock, kBlock>>>(pages, d_next, d_heads, d_weights, out, kSteps);
        CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaDeviceSynchronize());
    double sum = 0.0;
    if (!check(pages, d_next, d_heads, d_weights, out, sum)) return 1;
    std::printf("checksum: %.4f\n", sum);
    CUDA_CHECK(cudaFree(pages));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(d_next));
    CUDA_CHECK(cudaFree(d_heads));
    CUDA_CHECK(cudaFree(d_weights));
    return 0;
}
