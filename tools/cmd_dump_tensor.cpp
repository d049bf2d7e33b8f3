// `minfer dump-tensor FILE.gguf NAME --out FILE`: one tensor of a GGUF file dequantized to little-endian f32, as the
// kernels see it (the dequantization oracle test compares it with gguf-py's; also a debugging aid).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "kernels/quant.h"
#include "tools/commands.h"

namespace minfer::tools {
namespace {

struct DumpTensorArgs {
  std::string file;
  std::string name;
  std::string out;
};

std::vector<float> dequantized(const Tensor& t) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  if (kernels::is_quantized(t)) {
    const int64_t k = t.shape.back(), rows = t.numel() / k;
    Tensor matrix = t;
    matrix.shape = {rows, k};
    kernels::dequantize_rows(matrix, 0, rows, values.data());
  } else {
    const Tensor f = to_f32(t);
    std::copy(f.as<float>(), f.as<float>() + t.numel(), values.begin());
  }
  return values;
}

void run(const DumpTensorArgs& args) {
  const auto gguf = GgufFile::open(args.file);
  const GgufTensorInfo* info = gguf->find_tensor(args.name);
  if (!info) fail_load(args.file, "no tensor named '{}'", args.name);
  const Tensor t = gguf->tensor(*info);
  const std::vector<float> values = dequantized(t);
  std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(args.out.c_str(), "wb"), std::fclose);
  if (!out || std::fwrite(values.data(), sizeof(float), values.size(), out.get()) != values.size())
    fail("{}: cannot write", args.out);
  fmt::print(stderr, "{} {} {}: {} values\n", args.name, dtype_name(t.dtype), t.shape_string(), values.size());
}

}  // namespace

void add_dump_tensor_command(CLI::App& app) {
  auto args = std::make_shared<DumpTensorArgs>();
  CLI::App* cmd =
      app.add_subcommand("dump-tensor", "Write one tensor of a GGUF file dequantized to f32 (little-endian)");
  cmd->add_option("file", args->file, "GGUF file")->required();
  cmd->add_option("name", args->name, "Tensor name, e.g. blk.0.attn_q.weight")->required();
  cmd->add_option("-o,--out", args->out, "Output file")->required();
  cmd->callback([args] { run(*args); });
}

}  // namespace minfer::tools
