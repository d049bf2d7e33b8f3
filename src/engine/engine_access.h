// The engine's internals, for tests and tools (not part of the public API in include/minfer): the EngineCore
// behind an Engine, and an Engine over weights already loaded (a test that changes them first, calibration).
#pragma once

#include <memory>

#include "engine/engine_core.h"
#include "minfer/engine.h"
#include "model/model_weights.h"

namespace minfer {

struct EngineAccess {
  static EngineCore& core(Engine& engine) { return *engine.core_; }
  static std::unique_ptr<Engine> from_weights(const EngineConfig& config, ModelWeights weights) {
    return std::unique_ptr<Engine>(new Engine(std::make_unique<EngineCore>(config, std::move(weights))));
  }
};

}  // namespace minfer
