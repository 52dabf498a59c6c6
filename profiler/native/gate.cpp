#include "gate.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "dispatch.h"

namespace profiler {

namespace {

// Spins until the mapped host word at `flag` (the ticket's slot) has reached `ticket` (in wrap-around order)
// or one second of %globaltimer has passed.
constexpr char kGatePtx[] = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry intelliperf_gate(.param .u64 flag, .param .u32 ticket)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [flag];
    ld.param.u32 %r1, [ticket];
    mov.u64 %rd2, %globaltimer;
WAIT:
    ld.volatile.u32 %r2, [%rd1];
    sub.s32 %r3, %r2, %r1;
    setp.ge.s32 %p1, %r3, 0;
    @%p1 bra DONE;
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p2, %rd4, 1000000000;
    @%p2 bra WAIT;
DONE:
    ret;
}
)";

// One mapped word per in-flight ticket (ticket % kSlots), so that releasing one launch's gate opens no other
// thread's: a gate waits until its own slot holds its ticket or a later one.
constexpr uint32_t kSlots = 1024;

struct ContextGate {
  CUfunction function = nullptr;
  volatile uint32_t* host_slots = nullptr;  // page-locked, mapped into the device
  CUdeviceptr device_slots = 0;
  uint32_t next_ticket = 0;
  std::string failure;  // why the gate could not be set up in this context (not retried)
};

std::mutex g_mutex;
auto* g_gates = new std::unordered_map<CUcontext, ContextGate>();  // leaked: used until exit

std::string load(ContextGate& gate) {
  CUmodule module = nullptr;
  CUresult r = drv::module_load_data(&module, kGatePtx);
  if (r != CUDA_SUCCESS) return drv::describe("cuModuleLoadData (the gate kernel)", r);
  r = drv::module_get_function(&gate.function, module, "intelliperf_gate");
  if (r != CUDA_SUCCESS) return drv::describe("cuModuleGetFunction (the gate kernel)", r);
  void* host = nullptr;
  r = drv::mem_host_alloc(&host, kSlots * sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) return drv::describe("cuMemHostAlloc (the gate flags)", r);
  gate.host_slots = static_cast<volatile uint32_t*>(host);
  for (uint32_t i = 0; i < kSlots; ++i) gate.host_slots[i] = 0;
  r = drv::mem_host_get_device_pointer(&gate.device_slots, host, 0);
  if (r != CUDA_SUCCESS) return drv::describe("cuMemHostGetDevicePointer (the gate flags)", r);
  return std::string();
}

}  // namespace

std::string gate_hold(CUcontext context, CUstream stream, uint32_t& ticket) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ContextGate& gate = (*g_gates)[context];
  if (!gate.failure.empty()) return gate.failure;
  if (gate.function == nullptr || gate.device_slots == 0) {
    gate.failure = load(gate);
    if (!gate.failure.empty()) return gate.failure;
  }
  uint32_t next = gate.next_ticket + 1;
  CUdeviceptr slot = gate.device_slots + sizeof(uint32_t) * (next % kSlots);
  void* args[] = {&slot, &next};
  const CUresult r = drv::launch_kernel(gate.function, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
  if (r != CUDA_SUCCESS) return drv::describe("cuLaunchKernel (the gate kernel)", r);
  gate.next_ticket = next;
  ticket = next;
  return std::string();
}

void gate_release(CUcontext context, uint32_t ticket) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_gates->find(context);
  if (it == g_gates->end() || it->second.host_slots == nullptr) return;
  volatile uint32_t* slot = it->second.host_slots + ticket % kSlots;
  if (static_cast<int32_t>(ticket - *slot) > 0) *slot = ticket;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void gate_forget(CUcontext context) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_gates->erase(context);
}

}  // namespace profiler
