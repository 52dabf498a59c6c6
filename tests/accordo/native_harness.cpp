// Drives libaccordo's writer code without a GPU: `json <out>` writes escaped test strings as a JSON
// array; `capture <out>` writes a capture file through CaptureFile.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capture_file.h"
#include "json_out.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
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
      accordo::append_json_string(out, cases[i]);
    }
    out += "]";
    accordo::JsonlWriter writer;
    if (!writer.open(argv[2])) return 1;
    writer.write_line(out);
    return writer.publish() ? 0 : 1;
  }
  if (std::strcmp(argv[1], "capture") == 0) {
    accordo::CaptureFile file;
    if (!file.open(argv[2])) return 1;
    accordo::LaunchInfo launch;
    launch.launch_index = 5;
    launch.seq = 0;
    launch.name = "_Z5scalePKfPfi";
    launch.demangled = "scale(float const*, float*, int)";
    accordo::ParamInfo in, out, n, gone;
    in.index = 0, in.offset = 0, in.size = 8, in.kind = accordo::ParamKind::Pointer;
    in.value = 0x7000, in.alloc_base = 0x7000, in.alloc_size = 16;
    out.index = 1, out.offset = 8, out.size = 8, out.kind = accordo::ParamKind::Pointer;
    out.value = 0x7008, out.alloc_base = 0x7000, out.alloc_size = 16;
    n.index = 2, n.offset = 16, n.size = 4, n.kind = accordo::ParamKind::Scalar, n.bytes = {4, 0, 0, 0};
    gone.index = 3, gone.offset = 24, gone.size = 8, gone.kind = accordo::ParamKind::Unavailable;
    launch.params = {in, out, n, gone};
    file.write_launch(launch);
    const float before[4] = {1, 2, 3, 4};
    file.begin_buffer(0, 0, 0, 0x7000, sizeof(before));
    file.write_data(before, 8);
    file.write_data(before + 2, 8);
    file.begin_buffer(0, 0, 1, 0x7000, 16);
    file.write_zeros(16);
    file.write_error(0, "copy failed \xc3\xa9");
    file.write_time(0, 100, 350);
    file.write_error(accordo::CaptureFile::kNoLaunch, "global");
    file.finish();
    return 0;
  }
  return 2;
}
