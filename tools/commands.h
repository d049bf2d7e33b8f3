// Each `minfer` sub-command registers itself on the CLI11 app; one file per command.
#pragma once

#include <CLI/CLI.hpp>

namespace minfer::tools {

void add_bench_command(CLI::App& app);
// `minfer bench ops` (the issue's --report-ops), added under `bench` by add_bench_command.
void add_bench_ops_command(CLI::App& bench);
// `minfer bench serve`: the serving benchmark against a running server, added under `bench` by main.
void add_bench_serve_command(CLI::App& bench);
// `minfer bench comm`: collective latencies between the ranks of an mpirun group.
void add_bench_comm_command(CLI::App& bench);
void add_dump_tensor_command(CLI::App& app);
void add_generate_command(CLI::App& app);
// Quantization (issue 5): eval-ppl, eval-quant, quantize.
void add_eval_ppl_command(CLI::App& app);
void add_eval_quant_command(CLI::App& app);
// Quantized KV (issue 42): eval-kv.
void add_eval_kv_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_make_test_model_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);

}  // namespace minfer::tools
