// Float-sum case: vec4 (correct). Each thread adds four consecutive elements (one float4 load where
// the four are in range), then warp shuffles and one atomicAdd per warp.
#include "sums.cuh"

__global__ void sum(const float* in, float* out, int n) {
  const int first = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  float acc = 0.0f;
  if (first + 3 < n) {
    const float4 v = reinterpret_cast<const float4*>(in)[first / 4];
    acc = (v.x + v.y) + (v.z + v.w);
  } else {
    for (int i = first; i < n; ++i) acc += in[i];
  }
  const float total = warp_sum(acc);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, total);
}

void launch_sum(const float* in, float* out, int n) {
  sum<<<(n + 4 * kBlock - 1) / (4 * kBlock), kBlock>>>(in, out, n);
}

int main(int argc, char** argv) { return run_sum_host(argc, argv); }
