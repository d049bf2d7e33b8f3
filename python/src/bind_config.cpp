// EngineConfig, QuantConfig and SamplingParams as plain attribute bags. Range checks stay in C++
// (EngineConfig::validate, SamplingParams::validate); the Python layer checks types and names the keyword.
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>

#include "bindings.h"
#include "minfer/config.h"
#include "minfer/sampling.h"

namespace minfer::python {
namespace {

std::string fusion_name(FusionStrategy s) { return s == FusionStrategy::kNone ? "none" : "auto"; }

FusionStrategy parse_fusion(const std::string& name) {
  if (name == "auto") return FusionStrategy::kAuto;
  if (name == "none") return FusionStrategy::kNone;
  throw py::value_error("fusion_strategy must be 'auto' (fuse operators) or 'none' (one op at a time), got '" + name +
                        "'");
}

std::string layout_name(KvLayout l) { return l == KvLayout::kContiguous ? "contiguous" : "paged"; }

KvLayout parse_layout(const std::string& name) {
  if (name == "paged") return KvLayout::kPaged;
  if (name == "contiguous") return KvLayout::kContiguous;
  throw py::value_error("kv_layout must be 'paged' or 'contiguous', got '" + name + "'");
}

void bind_quant_config(py::module_& m) {
  py::class_<QuantConfig>(m, "QuantConfig")
      .def(py::init<>())
      .def_readwrite("weight_bits", &QuantConfig::weight_bits)
      .def_readwrite("activation_bits", &QuantConfig::activation_bits)
      .def_readwrite("symmetric", &QuantConfig::symmetric)
      .def_readwrite("group_size", &QuantConfig::group_size)
      .def_property_readonly("enabled", &QuantConfig::enabled);
}

void bind_speculative_config(py::module_& m) {
  py::class_<SpeculativeConfig>(m, "SpeculativeConfig")
      .def(py::init<>())
      .def_property(
          "method", [](const SpeculativeConfig& c) { return std::string(speculative_method_name(c.method)); },
          [](SpeculativeConfig& c, const std::string& name) {
            if (!parse_speculative_method(name, &c.method))
              throw std::invalid_argument("speculative method: '" + name + "' is not 'ngram', 'draft_model' or 'none'");
          })
      .def_readwrite("model", &SpeculativeConfig::model)
      .def_readwrite("disable_by_batch_size", &SpeculativeConfig::disable_by_batch_size)
      .def_readwrite("num_speculative_tokens", &SpeculativeConfig::num_speculative_tokens)
      .def_readwrite("prompt_lookup_min", &SpeculativeConfig::prompt_lookup_min)
      .def_readwrite("prompt_lookup_max", &SpeculativeConfig::prompt_lookup_max);
}

void bind_engine_config(py::module_& m) {
  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("model_path", &EngineConfig::model_path)
      .def_readwrite("num_threads", &EngineConfig::num_threads)
      .def_property(
          "fusion_strategy", [](const EngineConfig& c) { return fusion_name(c.fusion_strategy); },
          [](EngineConfig& c, const std::string& name) { c.fusion_strategy = parse_fusion(name); })
      .def_readwrite("quant", &EngineConfig::quant)
      .def_readwrite("page_size", &EngineConfig::page_size)
      .def_readwrite("state_snapshot_pages", &EngineConfig::state_snapshot_pages)
      .def_readwrite("kv_cache_memory", &EngineConfig::kv_cache_memory)
      .def_readwrite("kv_cache_memory_fraction", &EngineConfig::kv_cache_memory_fraction)
      .def_property(
          "kv_layout", [](const EngineConfig& c) { return layout_name(c.kv_layout); },
          [](EngineConfig& c, const std::string& name) { c.kv_layout = parse_layout(name); })
      .def_property(
          "kv_cache_dtype", [](const EngineConfig& c) { return std::string(kv_cache_dtype_name(c.kv_cache_dtype)); },
          [](EngineConfig& c, const std::string& name) {
            if (!parse_kv_cache_dtype(name, &c.kv_cache_dtype))
              throw std::invalid_argument("kv_cache_dtype: '" + name +
                                          "' is not auto, f32, bf16, f16, int8, fp8_e4m3, q8_0 or q4_0");
          })
      .def_readwrite("enable_prefix_caching", &EngineConfig::enable_prefix_caching)
      .def_readwrite("kv_offload_ram", &EngineConfig::kv_offload_ram)
      .def_readwrite("kv_cache_dir", &EngineConfig::kv_cache_dir)
      .def_readwrite("mmproj", &EngineConfig::mmproj)
      .def_readwrite("max_image_pixels", &EngineConfig::max_image_pixels)
      .def_readwrite("max_num_encoder_tokens", &EngineConfig::max_num_encoder_tokens)
      .def_readwrite("kv_cache_dir_size", &EngineConfig::kv_cache_dir_size)
      .def_readwrite("max_model_len", &EngineConfig::max_model_len)
      .def_readwrite("max_num_seqs", &EngineConfig::max_num_seqs)
      .def_readwrite("max_num_batched_tokens", &EngineConfig::max_num_batched_tokens)
      .def_readwrite("enable_continuous_batching", &EngineConfig::enable_continuous_batching)
      .def_readwrite("seed", &EngineConfig::seed)
      .def_readwrite("speculative", &EngineConfig::speculative)
      .def_property(
          "task", [](const EngineConfig& c) { return c.task == EngineTask::kEmbed ? "embed" : "generate"; },
          [](EngineConfig& c, const std::string& name) {
            c.task = name == "embed" ? EngineTask::kEmbed : EngineTask::kGenerate;
          })
      .def_property(
          "pooling", [](const EngineConfig& c) { return c.pooling == PoolingType::kMean ? "mean" : "last"; },
          [](EngineConfig& c, const std::string& name) {
            c.pooling = name == "mean" ? PoolingType::kMean : PoolingType::kLast;
          })
      .def_readwrite("normalize_embeddings", &EngineConfig::normalize_embeddings)
      .def("validate", &EngineConfig::validate);
}

void bind_structured_outputs(py::module_& m) {
  py::enum_<StructuredOutputs::Kind>(m, "StructuredOutputsKind")
      .value("json_schema", StructuredOutputs::Kind::kJsonSchema)
      .value("json_object", StructuredOutputs::Kind::kJsonObject)
      .value("regex", StructuredOutputs::Kind::kRegex)
      .value("choice", StructuredOutputs::Kind::kChoice)
      .value("grammar", StructuredOutputs::Kind::kGrammar);
  py::class_<StructuredOutputs>(m, "StructuredOutputs")
      .def(py::init<>())
      .def_readwrite("kind", &StructuredOutputs::kind)
      .def_readwrite("spec", &StructuredOutputs::spec);
}

void bind_sampling_params(py::module_& m) {
  py::class_<SamplingParams>(m, "SamplingParams")
      .def(py::init<>())
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_readwrite("skip_special_tokens", &SamplingParams::skip_special_tokens)
      .def_readwrite("min_tokens", &SamplingParams::min_tokens)
      .def_readwrite("logit_bias", &SamplingParams::logit_bias)
      .def_readwrite("structured_outputs", &SamplingParams::structured_outputs)
      .def("validate", &SamplingParams::validate);
}

}  // namespace

void bind_config(py::module_& m) {
  bind_quant_config(m);
  bind_speculative_config(m);
  bind_engine_config(m);  // after QuantConfig and SpeculativeConfig, the types of two of its fields
  bind_structured_outputs(m);
  bind_sampling_params(m);
}

}  // namespace minfer::python
