// Tiny CUDA program for the Accordo GPU tests. Usage: sample_app [ok|exit|crash|graph] [n]
//   ok    : scale x3, add_one<float> x2, return from main
//   exit  : same, then exit(0) from main without cudaDeviceReset
//   crash : scale, then bad_write, a kernel that writes to an invalid address
//   graph : same as ok, with the last add_one launched through a CUDA graph (stream capture)
//   graphfirst: scale's first launch is captured into a CUDA graph (global capture mode), then the
//           graph runs; nothing is launched before the capture
//   reset : same as ok, then cudaDeviceReset and one more scale in the new context
//   once  : scale once, nothing else (the process's first and only kernel launch)
//   threads: 4 host threads, each on its own stream, launch scale 3 times at once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));          \
      return 2;                                                                        \
    }                                                                                  \
  } while (0)

__global__ void scale(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i] + 1.0f;
}

template <typename T>
__global__ void add_one(T* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += T(1);
}

__global__ void bad_write(float* p) { p[threadIdx.x + (1ull << 40)] = 1.0f; }

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "ok";
  const int n = argc > 2 ? std::atoi(argv[2]) : 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = 0.5f * i;
  float *in = nullptr, *out = nullptr;
  CHECK(cudaMalloc(&in, n * sizeof(float)));
  CHECK(cudaMalloc(&out, n * sizeof(float)));
  CHECK(cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(out, 0, n * sizeof(float)));
  const int block = 128, grid = (n + block - 1) / block;
  if (std::strcmp(mode, "graphfirst") == 0) {
    cudaStream_t stream;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamCreate(&stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    scale<<<grid, block, 0, stream>>>(in, out, n);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf(host[n - 1] == 2.0f * 0.5f * (n - 1) + 1.0f ? "ok\n" : "wrong\n");
    return 0;
  }
  if (std::strcmp(mode, "once") == 0) {
    scale<<<grid, block>>>(in, out, n);
    CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf(host[n - 1] == 2.0f * 0.5f * (n - 1) + 1.0f ? "ok\n" : "wrong\n");
    return 0;
  }
  if (std::strcmp(mode, "threads") == 0) {
    std::vector<std::thread> threads;
    std::vector<cudaError_t> errors(4, cudaSuccess);
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        cudaStream_t stream;
        cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        for (int r = 0; r < 3 && e == cudaSuccess; ++r) {
          scale<<<grid, block, 0, stream>>>(in, out, n);
          e = cudaGetLastError();
        }
        if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
        errors[t] = e;
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (cudaError_t e : errors) CHECK(e);
    std::printf("ok\n");
    return 0;
  }
  if (std::strcmp(mode, "crash") == 0) {
    scale<<<grid, block>>>(in, out, n);
    bad_write<<<1, 32>>>(out);
    cudaError_t e = cudaDeviceSynchronize();
    std::fprintf(stderr, "sync after bad_write: %s\n", cudaGetErrorString(e));
    return 1;
  }
  for (int r = 0; r < 3; ++r) scale<<<grid, block>>>(in, out, n);
  if (std::strcmp(mode, "graph") == 0) {
    add_one<float><<<grid, block>>>(out, n);
    cudaStream_t stream;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamCreate(&stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    add_one<float><<<grid, block, 0, stream>>>(out, n);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
  } else {
    for (int r = 0; r < 2; ++r) add_one<float><<<grid, block>>>(out, n);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(host.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  const float expected = 2.0f * 0.5f * (n - 1) + 3.0f;
  if (std::fabs(host[n - 1] - expected) > 1e-5f * std::fabs(expected)) {
    std::fprintf(stderr, "wrong result %f\n", host[n - 1]);
    return 1;
  }
  std::printf("ok\n");
  if (std::strcmp(mode, "exit") == 0) std::exit(0);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  if (std::strcmp(mode, "reset") == 0) {
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&in, n * sizeof(float)));
    CHECK(cudaMalloc(&out, n * sizeof(float)));
    scale<<<grid, block>>>(in, out, n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(in));
    CHECK(cudaFree(out));
  }
  return 0;
}
