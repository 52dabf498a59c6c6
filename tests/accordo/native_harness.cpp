// Drives libintelliperf_profiler's writer code without a GPU: `json <out>` writes escaped test strings as a JSON
// array; `capture <out>` writes a capture file through CaptureFile; `snapshot[-nodedupe|-unpinned] <out>`
// writes the script of test_native_cpu.py's snapshot tests through SnapshotWriter, with host memory as
// the device.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capture_file.h"
#include "cubin_symbols.h"
#include "json_out.h"
#include "snapshot.h"

namespace {

// "Device" addresses are host addresses. A copy touching [bad_start, bad_end) fails when it starts
// (fail_wait false) or when it is waited for (fail_wait true).
class FakeDevice final : public profiler::DeviceCopier {
 public:
  bool pin_fails = false;
  uint64_t bad_start = 0, bad_end = 0;
  bool fail_wait = false;
  int pinned = 0;

  std::string pin(void*, size_t) override {
    if (pin_fails) return "fake pinning failed";
    ++pinned;
    return "";
  }
  void unpin(void*) override { --pinned; }
  std::string start_copy(void* dst, uint64_t src, size_t nbytes) override {
    if (outstanding_) return "two copies outstanding";
    const bool bad = src < bad_end && src + nbytes > bad_start;
    if (bad && !fail_wait) return "fake copy failed";
    outstanding_ = true;
    wait_fails_ = bad;
    if (!bad) std::memcpy(dst, reinterpret_cast<const void*>(src), nbytes);
    return "";
  }
  std::string wait_copy() override {
    if (!outstanding_) return "no copy outstanding";
    outstanding_ = false;
    return wait_fails_ ? "fake wait failed" : "";
  }

 private:
  bool outstanding_ = false;
  bool wait_fails_ = false;
};

profiler::ParamInfo pointer_param(uint32_t index, const std::vector<uint8_t>& memory) {
  profiler::ParamInfo p;
  p.index = index, p.offset = 8 * index, p.size = 8, p.kind = profiler::ParamKind::Pointer;
  p.value = p.alloc_base = reinterpret_cast<uint64_t>(memory.data());
  p.alloc_size = memory.size();
  return p;
}

// The script; test_native_cpu.py replays it on numpy arrays.
int snapshot_script(const char* path, bool dedupe, bool pin_fails) {
  std::vector<uint8_t> a(1000), b(1000), c(8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(i + 1);
  const auto addr = [](const std::vector<uint8_t>& v) { return reinterpret_cast<uint64_t>(v.data()); };

  profiler::CaptureFile file;
  if (!file.open(path)) return 1;
  FakeDevice device;
  device.pin_fails = pin_fails;
  profiler::SnapshotOptions options;
  options.dedupe = dedupe;
  options.chunk_bytes = 256;
  options.threads = 3;
  options.min_slice = 16;
  options.max_mapped_bytes = 1500;  // one of the 1000-byte ranges stays mapped: the others are remapped
  {
    profiler::SnapshotWriter writer(file, device, options);
    const auto snap = [&](uint64_t seq, uint32_t param, uint32_t phase, const std::vector<uint8_t>& v) {
      writer.write(seq, param, phase, addr(v), v.size());
    };
    for (uint64_t seq = 0; seq < 4; ++seq) {
      profiler::LaunchInfo launch;
      launch.launch_index = seq;
      launch.seq = seq;
      launch.name = launch.demangled = "k";
      launch.params = {pointer_param(0, a), pointer_param(1, b), pointer_param(2, c)};
      file.write_launch(launch);
    }
    // launch 0: everything new; B changes in its last chunk
    snap(0, 0, 0, a), snap(0, 1, 0, b), snap(0, 2, 0, c);
    b[900] ^= 0xff;
    snap(0, 0, 1, a), snap(0, 1, 1, b), snap(0, 2, 1, c);
    // launch 1: B changes in its first chunk
    snap(1, 0, 0, a), snap(1, 1, 0, b);
    b[0] ^= 0xff;
    snap(1, 0, 1, a), snap(1, 1, 1, b);
    // launch 2: the copy of B's third chunk fails to start; A's second chunk fails when waited for
    device.bad_start = addr(b) + 600, device.bad_end = addr(b) + 601;
    snap(2, 1, 0, b);
    device.bad_start = addr(a) + 300, device.bad_end = addr(a) + 301, device.fail_wait = true;
    snap(2, 0, 1, a);
    device.bad_start = device.bad_end = 0, device.fail_wait = false;
    snap(2, 1, 1, b);
    // launch 3: B equals launch 2's after; A is new again after its failed copy
    snap(3, 1, 0, b), snap(3, 0, 0, a);
  }
  if (device.pinned != 0) return 3;
  file.finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  if (std::strcmp(argv[1], "snapshot") == 0) return snapshot_script(argv[2], true, false);
  if (std::strcmp(argv[1], "snapshot-nodedupe") == 0) return snapshot_script(argv[2], false, false);
  if (std::strcmp(argv[1], "snapshot-unpinned") == 0) return snapshot_script(argv[2], true, true);
  if (std::strcmp(argv[1], "json") == 0) {
    const std::vector<std::string> cases = {
        "plain",
        "void k<float, 2>(float const*, int&)",
        "quote\" backslash\\ slash/",
        std::string("ctl\x01\x1f\n\t\r\b\f\x7f", 11),
        "utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
        "bad \xff \xc3 \xed\xa0\x80 end",
        std::string("nul\0in", 6),
    };
    std::string out = "[";
    for (size_t i = 0; i < cases.size(); ++i) {
      if (i > 0) out += ",";
      profiler::append_json_string(out, cases[i]);
    }
    out += "]";
    profiler::JsonlWriter writer;
    if (!writer.open(argv[2])) return 1;
    writer.write_line(out);
    return writer.publish() ? 0 : 1;
  }
  if (std::strcmp(argv[1], "capture") == 0) {
    profiler::CaptureFile file;
    if (!file.open(argv[2])) return 1;
    profiler::LaunchInfo launch;
    launch.launch_index = 5;
    launch.seq = 0;
    launch.name = "_Z5scalePKfPfi";
    launch.demangled = "scale(float const*, float*, int)";
    profiler::ParamInfo in, out, n, gone;
    in.index = 0, in.offset = 0, in.size = 8, in.kind = profiler::ParamKind::Pointer;
    in.value = 0x7000, in.alloc_base = 0x7000, in.alloc_size = 16;
    out.index = 1, out.offset = 8, out.size = 8, out.kind = profiler::ParamKind::Pointer;
    out.value = 0x7008, out.alloc_base = 0x7000, out.alloc_size = 16;
    n.index = 2, n.offset = 16, n.size = 4, n.kind = profiler::ParamKind::Scalar, n.bytes = {4, 0, 0, 0};
    gone.index = 3, gone.offset = 24, gone.size = 8, gone.kind = profiler::ParamKind::Unavailable;
    launch.params = {in, out, n, gone};
    const char image[] = "\x7f" "ELF not really";
    file.write_module(0, {"_Z5scalePKfPfi", "_Z5otherv"}, image, sizeof(image) - 1);
    file.write_launch(launch);
    profiler::LaunchShape shape;
    shape.grid[0] = 7, shape.grid[1] = 2, shape.grid[2] = 1;
    shape.block[0] = 256, shape.block[1] = 1, shape.block[2] = 1;
    shape.dynamic_shared = 4096;
    shape.flags = profiler::kShapePerThread;
    shape.stream = 0x1234;
    shape.persisting_l2 = 9830400;
    shape.module = 0;
    file.write_shape(0, shape);
    const float before[4] = {1, 2, 3, 4};
    file.begin_buffer({0, 0, 0}, 0x7000, sizeof(before));
    file.write_data(before, 8);
    file.write_data(before + 2, 8);
    file.begin_buffer({0, 0, 1}, 0x7000, 16);
    file.write_zeros(16);
    file.write_error(0, "copy failed \xc3\xa9");
    file.write_time(0, 100, 350);
    file.write_error(profiler::CaptureFile::kNoLaunch, "global");
    file.finish();
    return 0;
  }
  if (std::strcmp(argv[1], "symbols") == 0 || std::strcmp(argv[1], "code") == 0) {
    // the function names of a cubin, one per line ("symbols"), or each function's name and code hash ("code")
    std::FILE* in = std::fopen(argv[2], "rb");
    if (in == nullptr) return 1;
    std::vector<char> image;
    char chunk[65536];
    size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof(chunk), in)) > 0) image.insert(image.end(), chunk, chunk + got);
    std::fclose(in);
    if (std::strcmp(argv[1], "code") == 0) {
      for (const profiler::FunctionCode& function : profiler::cubin_function_code(image.data(), image.size())) {
        std::printf("%s %016llx\n", function.name.c_str(), static_cast<unsigned long long>(function.hash));
      }
      return 0;
    }
    for (const std::string& name : profiler::cubin_function_names(image.data(), image.size())) {
      std::printf("%s\n", name.c_str());
    }
    return 0;
  }
  return 2;
}
