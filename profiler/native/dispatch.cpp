#include "dispatch.h"

#include <dlfcn.h>

#include <mutex>

#include "log.h"

namespace profiler::drv {

namespace detail {

namespace {
void* libcuda() {
  static void* const handle = [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == nullptr) {
      const char* why = dlerror();
      log_error("cannot load libcuda.so.1: %s", why != nullptr ? why : "unknown error");
    }
    return h;
  }();
  return handle;
}
}  // namespace

void* resolve(const char* symbol) {
  void* handle = libcuda();
  if (handle == nullptr) return nullptr;
  static std::mutex dlerror_mutex;  // dlerror() state is per thread, but keep messages whole
  std::lock_guard<std::mutex> lock(dlerror_mutex);
  dlerror();
  void* address = dlsym(handle, symbol);
  if (address == nullptr) {
    const char* why = dlerror();
    log_error("cannot resolve driver function %s: %s", symbol, why != nullptr ? why : "symbol is null");
  }
  return address;
}

}  // namespace detail

std::string describe(const char* what, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name(result, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_UNKNOWN";
  if (get_error_string(result, &text) != CUDA_SUCCESS || text == nullptr) text = "no description";
  std::string out(what);
  out += " failed: ";
  out += name;
  out += " (error ";
  out += std::to_string(static_cast<int>(result));
  out += ": ";
  out += text;
  out += ")";
  return out;
}

}  // namespace profiler::drv
