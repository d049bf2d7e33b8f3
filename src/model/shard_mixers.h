// Tensor parallel for the recurrent mixers and the shared experts (model/shard_weights.h splits the rest): each rank
// holds some of the heads, so its state slots hold only those heads' state.
//   Gated DeltaNet   the rank's key heads and their value heads: rows of q | k | v, z, b, a, the conv and the
//                    per-head vectors; columns of out_proj (GGUF's tiled value heads gathered so they stay tiled)
//   Mamba2           the rank's heads and their groups of B and C (the gated norm's groups must not span ranks)
//   short conv       the rank's channels
//   shared expert    its FFN columns, as the dense MLP's
// The out projections are row-parallel: the graph all-reduces their outputs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/model_weights.h"

namespace minfer {

class MixerShard {
 public:
  // Throws Error naming what does not divide among the ranks.
  MixerShard(const ModelConfig& config, int rank, int ranks);
  // The rank's part of weight `rest` (the name after "layers.{i}.") of layer `layer`; nullopt: not one of its
  // weights (the caller splits it).
  std::optional<Tensor> part(const std::string& name, int64_t layer, std::string_view rest, const Tensor& t) const;
  // The shard's counts: key / value heads, Mamba2 heads and groups, conv channels, shared expert width.
  void shrink(ModelConfig& c) const;

 private:
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  struct Cut {
    Ranges ranges;
    bool columns = false;  // row-parallel: input columns
  };
  using Cuts = std::map<std::string, Cut, std::less<>>;
  void plan_delta_rule(const LinearAttentionShape& l);
  void plan_mamba2(const MambaShape& m);

  const ModelConfig& c_;
  int rank_, ranks_;
  Cuts delta_, mamba_, conv_, shared_;
};

}  // namespace minfer
