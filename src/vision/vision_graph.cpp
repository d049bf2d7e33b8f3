#include "vision/vision_graph.h"

#include <cmath>

namespace minfer::vision {
namespace {

using graph::Graph;
using graph::Node;
using graph::OpKind;
using graph::RowSpace;
using graph::ValueId;

class VisionBuilder {
 public:
  VisionBuilder(const VisionModel& m, Graph& g) : m_(m), g_(g) {}

  ValueId node(OpKind kind, std::vector<ValueId> inputs, const std::string& out, int64_t width,
               RowSpace rows = RowSpace::kTokens, const Tensor* weight = nullptr, const Tensor* bias = nullptr) {
    Node n;
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.output = g_.add_value(out, width, rows);
    n.weight = weight;
    n.bias = bias;
    n.eps = m_.config.eps;
    return g_.add_node(std::move(n));
  }
  ValueId matmul(ValueId x, const std::string& w, const std::string& b, const std::string& out,
                 RowSpace rows = RowSpace::kTokens) {
    const Tensor& weight = m_.get(w);
    return node(OpKind::kMatMul, {x}, out, weight.dim(0), rows, &weight, b.empty() ? nullptr : &m_.get(b));
  }
  ValueId layernorm(ValueId x, const std::string& w, const std::string& b, const std::string& out) {
    return node(OpKind::kLayerNorm, {x}, out, m_.config.hidden, RowSpace::kTokens, &m_.get(w), &m_.get(b));
  }

  // Layer `i`'s attention block from its normalised input: q/k/v with biases, the KV write to the scratch pool, every
  // patch attending to its whole image, the output projection.
  ValueId attention(int64_t i, ValueId h) {
    const std::string l = "v.layers." + std::to_string(i) + ".";
    const VisionConfig& c = m_.config;
    const ValueId q = matmul(h, l + "wq", l + "bq", l + "q");
    const ValueId k = matmul(h, l + "wk", l + "bk", l + "k");
    const ValueId v = matmul(h, l + "wv", l + "bv", l + "v");
    Node attend;
    attend.kind = OpKind::kEncoderAttention;
    attend.inputs = {q, k, v};
    attend.output = g_.add_value(l + "attn", c.hidden);
    attend.layer = static_cast<int32_t>(i);
    attend.heads = c.heads;
    attend.head_dim = c.head_dim();
    attend.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
    const ValueId a = g_.add_node(std::move(attend));
    return matmul(a, l + "wo", l + "bo", l + "attn_out");
  }

  ValueId mlp(int64_t i, ValueId h) {
    const std::string l = "v.layers." + std::to_string(i) + ".";
    const ValueId f = matmul(h, l + "fc1", l + "fc1_b", l + "fc1_out");
    const ValueId act = node(OpKind::kGeluTanh, {f}, l + "gelu", m_.config.intermediate);
    return matmul(act, l + "fc2", l + "fc2_b", l + "mlp_out");
  }

 private:
  const VisionModel& m_;
  Graph& g_;
};

}  // namespace

graph::Graph build_vision_graph(const VisionModel& model) {
  const VisionConfig& c = model.config;
  Graph g;
  VisionBuilder b(model, g);
  const ValueId patches = b.node(OpKind::kInput, {}, "patches", c.channels * c.patch_size * c.patch_size);
  const ValueId embedded = b.matmul(patches, "v.patch_embd", "v.patch_bias", "patch_embd");
  // The step's tokens are the patches' positions, so the embedding node reads the learned position table.
  Node positions;
  positions.kind = OpKind::kEmbedding;
  positions.output = g.add_value("positions", c.hidden);
  positions.weight = &model.get("v.pos_embd");
  ValueId x = b.node(OpKind::kAdd, {embedded, g.add_node(std::move(positions))}, "embeddings", c.hidden);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "v.layers." + std::to_string(i) + ".";
    x = b.node(OpKind::kAdd, {x, b.attention(i, b.layernorm(x, l + "ln1_w", l + "ln1_b", l + "ln1"))}, l + "h",
               c.hidden);
    x = b.node(OpKind::kAdd, {x, b.mlp(i, b.layernorm(x, l + "ln2_w", l + "ln2_b", l + "ln2"))}, l + "out", c.hidden);
  }
  x = b.layernorm(x, "v.post_ln_w", "v.post_ln_b", "post_ln");
  // Gemma 3's projector: average pooling of the patch grid to tokens_per_image, RMSNorm, the projection.
  Node pool;
  pool.kind = OpKind::kAvgPool;
  pool.inputs = {x};
  pool.output = g.add_value("pooled", c.hidden, RowSpace::kSampled);
  pool.block = c.patches_per_side() / static_cast<int64_t>(std::llround(std::sqrt(double(c.tokens_per_image))));
  const ValueId pooled = g.add_node(std::move(pool));
  const ValueId normed =
      b.node(OpKind::kRmsNorm, {pooled}, "mm_norm", c.hidden, RowSpace::kSampled, &model.get("mm.norm"));
  g.set_output(b.matmul(normed, "mm.proj", "", "image_embeddings", RowSpace::kSampled));
  g.verify();
  return g;
}

}  // namespace minfer::vision
