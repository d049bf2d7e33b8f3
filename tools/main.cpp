// `minfer`: the command-line front end (generate, info, make-test-model, ...).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "dist/communicator.h"
#include "tools/commands.h"
#include "tools/tensor_parallel.h"

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries only a command's output (generated text, ids, JSON, tables).
  spdlog::set_default_logger(spdlog::stderr_color_mt("minfer"));
  CLI::App app{"minfer: a CPU-first LLM inference engine"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the command's name
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); },
         "Log lines on stderr at this level and above")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->default_str("info");
  minfer::tools::add_bench_command(app);
  minfer::tools::add_bench_serve_command(*app.get_subcommand("bench"));
  minfer::tools::add_bench_comm_command(*app.get_subcommand("bench"));
  minfer::tools::add_dump_tensor_command(app);
  minfer::tools::add_generate_command(app);
  minfer::tools::add_eval_ppl_command(app);
  minfer::tools::add_eval_quant_command(app);
  minfer::tools::add_eval_kv_command(app);
  minfer::tools::add_quantize_command(app);
  minfer::tools::add_info_command(app);
  minfer::tools::add_make_test_model_command(app);
  minfer::tools::add_serve_command(app);
  minfer::tools::add_tokenize_command(app);
  // Under mpirun (tensor parallel) every rank gets here; MPI stays untouched otherwise.
  minfer::dist::Communicator::init(&argc, &argv);
  minfer::tools::set_command_line(argc, argv);
  int code = 0;
  try {
    app.parse(argc, argv);
    minfer::tools::end_tensor_parallel_run();
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    code = 1;
  }
  // A failed rank (or an interrupted group) ends every rank: the others may be waiting for it.
  minfer::dist::Communicator::finalize(code == 0 && !minfer::dist::Communicator::world().interrupted());
  return code;
}
