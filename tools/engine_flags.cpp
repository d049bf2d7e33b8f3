#include "tools/engine_flags.h"

#include <string>

#include "graph/passes/fusion_passes.h"

namespace minfer::tools {

EngineConfig EngineFlags::resolve() const {
  EngineConfig c = config;
  c.quant = quant.config();
  c.enable_continuous_batching = !no_continuous_batching;
  return c;
}

void add_fusion_flags(CLI::App& cmd, FusionStrategy& strategy, std::vector<std::string>& disabled) {
  cmd.add_option_function<std::string>(
         "--fusion-strategy,--fusion",
         [&strategy](const std::string& v) { strategy = v == "none" ? FusionStrategy::kNone : FusionStrategy::kAuto; },
         "Operator fusion: auto (every pass) or none (one node per op)")
      ->check(CLI::IsMember({"auto", "none"}))
      ->option_text("auto|none")
      ->default_str("auto");
  std::string names;
  for (const std::string& p : graph::pass_names()) names += (names.empty() ? "" : ", ") + p;
  cmd.add_option("--disable-pass", disabled, "Skip a fusion or weight-layout pass (debugging; repeatable): " + names)
      ->check(CLI::IsMember(graph::pass_names()));
}

// vLLM's speculative_config fields as flags.
void add_speculative_flags(CLI::App& cmd, SpeculativeConfig& spec) {
  cmd.add_option_function<std::string>(
         "--speculative", [&spec](const std::string& v) { parse_speculative_method(v, &spec.method); },
         "Speculative decoding: ngram (prompt lookup: drafts from earlier in the prompt and output, checked in the "
         "same step; outputs unchanged), draft_model (with --speculative-model) or none")
      ->check(CLI::IsMember({"none", "ngram", "draft_model"}))
      ->option_text("none|ngram|draft_model")
      ->default_str("none");
  cmd.add_option_function<std::string>(
         "--speculative-model",
         [&spec](const std::string& path) {
           spec.model = path;
           spec.method = SpeculativeMethod::kDraftModel;
         },
         "Speculative decoding with a draft model: a smaller model with the same vocabulary (any format the engine "
         "loads) proposes the drafts, greedily, on KV pages of its own")
      ->option_text("PATH");
  cmd.add_option("--num-speculative-tokens", spec.num_speculative_tokens,
                 "Drafts per sequence and step at most (each sequence adapts below it)")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  cmd.add_option("--speculative-disable-by-batch-size", spec.disable_by_batch_size,
                 "No drafts in steps that run this many sequences or more (0 = never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd.add_option("--prompt-lookup-min", spec.prompt_lookup_min, "--speculative ngram: shortest suffix looked up")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--prompt-lookup-max", spec.prompt_lookup_max, "--speculative ngram: longest suffix looked up")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

void add_engine_flags(CLI::App& cmd, EngineFlags& flags, const std::string& model_help) {
  EngineConfig& e = flags.config;
  cmd.add_option("-m,--model", e.model_path, model_help);
  cmd.add_option("-t,--threads", e.num_threads, "Compute threads (0 = one per core)")->capture_default_str();
  cmd.add_option("--max-model-len", e.max_model_len,
                 "Context per request, prompt + output (0 = the model's, cut to what the KV budget holds)")
      ->capture_default_str();
  cmd.add_option("--max-num-seqs", e.max_num_seqs, "Most sequences running at once")->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Most tokens computed in one step")
      ->capture_default_str();
  cmd.add_option("--page-size,--block-size", e.page_size, "Tokens per KV page (power of two, 8-256)")
      ->capture_default_str();
  cmd.add_option("--state-snapshot-pages", e.state_snapshot_pages,
                 "Recurrent-layer models: keep a state copy every N pages for prefix caching (0 = none)")
      ->capture_default_str();
  cmd.add_option("--kv-cache-memory", e.kv_cache_memory, "KV pool size, e.g. 512MiB (0 = a fraction of free RAM)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--kv-cache-memory-fraction", e.kv_cache_memory_fraction,
                 "Fraction of free memory for the KV pool when --kv-cache-memory is 0")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--kv-cache-dtype", [&e](const std::string& v) { parse_kv_cache_dtype(v, &e.kv_cache_dtype); },
         "KV cache element type: auto (a 16-bit type for 16-bit and quantized weights, else f32), f32, bf16, f16, "
         "int8 (a scale per token and head), fp8_e4m3, q8_0 or q4_0 (llama.cpp's blocks of 32)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "int8", "fp8_e4m3", "fp8", "q8_0", "q4_0"}))
      ->option_text("auto|f32|bf16|f16|int8|fp8_e4m3|q8_0|q4_0")
      ->default_str(kv_cache_dtype_name(e.kv_cache_dtype));
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", e.enable_prefix_caching,
               "Share the KV pages of equal prompt prefixes (default on)");
  cmd.add_option("--kv-offload-ram", e.kv_offload_ram,
                 "Host RAM for KV pages evicted from the prefix cache, e.g. 4GiB (0 = none)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--kv-cache-dir", e.kv_cache_dir,
                 "Folder that keeps prompt KV pages across restarts (written through; read back on a prefix hit)");
  cmd.add_option("--kv-cache-dir-size", e.kv_cache_dir_size, "Most bytes --kv-cache-dir may hold (LRU), e.g. 20GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("8GiB");
  cmd.add_option("--mmproj", e.mmproj, "A llama.cpp projector GGUF: the vision tower of a GGUF language model");
  cmd.add_option("--max-image-pixels", e.max_image_pixels,
                 "Images larger than this many pixels are refused (multimodal models)")
      ->capture_default_str();
  cmd.add_flag("--no-continuous-batching", flags.no_continuous_batching,
               "Static batching: run a batch to completion before the next");
  cmd.add_option("--seed", e.seed, "Seed of requests that give none (repeatable sampling)");
  cmd.add_option("--tensor-parallel-size,--tp", e.tensor_parallel_size,
                 "Split the model over N processes (started by mpirun, or by minfer itself without it; -t threads "
                 "each)")
      ->capture_default_str();
  cmd.add_flag("--enable-expert-parallel", e.enable_expert_parallel,
               "MoE layers: whole experts per rank, tokens exchanged by all-to-all (needs --tensor-parallel-size)");
  cmd.add_option("--distributed-timeout", e.distributed_timeout_s,
                 "Seconds a rank waits for the others before the group is declared broken")
      ->capture_default_str();
  cmd.add_option_function<std::string>(
         "--task", [&e](const std::string& v) { e.task = v == "embed" ? EngineTask::kEmbed : EngineTask::kGenerate; },
         "generate (tokens), or embed (one pooled, normalised embedding per prompt: serve's /v1/embeddings)")
      ->check(CLI::IsMember({"generate", "embed"}))
      ->default_str("generate");
  cmd.add_option_function<std::string>(
         "--pooling", [&e](const std::string& v) { e.pooling = v == "mean" ? PoolingType::kMean : PoolingType::kLast; },
         "--task embed: the last position's hidden state, or the mean over the prompt")
      ->check(CLI::IsMember({"last", "mean"}))
      ->default_str("last");
  add_speculative_flags(cmd, e.speculative);
  add_fusion_flags(cmd, e.fusion_strategy, e.disabled_fusion_passes);
  add_quant_flags(cmd, flags.quant);
}

}  // namespace minfer::tools
