// nn::LongShortAttention2d: ViL-LS 2-D long-short attention (docs/transformer-ls.md §4.2–4.3),
// composed from primitive differentiable ops.
//
// Layout of the computation (B batch, h heads, e = C/h, nx map side, G = (nx/w)² groups,
// T = w + 2·side, P = nx + 2·side the zero-padded side):
//   q, k, v [B, h, g+N, e]  (q scaled by e^-1/2; k, v through LN_L over C before the head split)
//   queries regrouped by one index_select into group order  → qg  [B, h, G, w², e]
//   keys/values: pad the map by `side` zeros, index_select the T×T block of every group
//                                                              → kw, vw [B, h, G, T², e]
//   logits  [proj r | window T² (−∞ off-image, + RPE) | global g] → [B, h, G, w², r + T² + g],
//   one softmax, attn_drop, weighted sum of [V̄ | vw | v_g], back to patch order by index_select.
// Everything is O(N) in memory: no N×N tensor is formed.
//
// Deviations / choices (documented as the issue asks):
//  * g ∈ {0, 1} only. The official code writes the patch→global value term as a broadcast
//    product that is correct only for g = 1 (§4.2 step 9, §7.16); g > 1 is rejected rather than
//    reproducing that arithmetic.
//  * Square maps only (args.height == args.width), as the official code reads one side nx.
//  * w = 1: side = 1, T = 3, but the official table (p = ⌊w/2⌋ = 0) has 1 row and an index map of
//    3×3 offsets that cannot address it (§4.3: "w = 1 with RPE is unusable"), so w = 1 requires
//    rpe = false; w = 1 without RPE is supported (3×3 key blocks).
//  * Softmaxes run in the activation dtype (f32 or f64): the CPU computes in f32 or f64 (bf16 and
//    f16 are storage types there), so the "fp32 softmax" of docs/transformer-ls.md §1.1 holds for
//    f32 activations and f64 is used as-is for checks.
//  * Extensions for CvT*-LS, not in the official code (both off by default): external_projections
//    (q, k, v and the projection logits come from the caller, forward_projected) and
//    projection_stride s > 1 (the dynamic projection compresses only every s-th row and column of
//    LN_L(k), LN_L(v), like CvT's stride-s key/value convolutions; the window keeps every key).
//  * dual_ln = false (an extension, for the paper's DualLN ablation) drops LN_L and LN_G: keys
//    and values enter the window, global and projected slots as the projections give them.
//  * Initialisation follows ViL (§4.4): Linear weights trunc-normal std 0.02, biases 0,
//    LayerNorms (1, 0), the RPE table trunc-normal 0.02.
#include "lsformer/models/attention/long_short_2d.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "lsformer/engine/profiler.h"
#include "lsformer/models/attention/heads.h"
#include "lsformer/models/nn/init.h"
#include "lsformer/ops/binary.h"
#include "lsformer/ops/kernels/long_short_geometry.h"
#include "lsformer/ops/factory.h"
#include "lsformer/ops/index.h"
#include "lsformer/ops/matmul.h"
#include "lsformer/ops/reduce.h"
#include "lsformer/ops/shape.h"
#include "lsformer/ops/softmax.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/engine/autograd.h"

namespace lsf::nn {

namespace {

constexpr const char* kOp = "LongShortAttention2d";

// Index tensors of one (nx, w) geometry, built on the host and moved to the device of x.
struct WindowIndex {
  Tensor query_order;    // [N] i64: patch index of the j-th query in group order
  Tensor patch_to_slot;  // [N] i64: inverse of query_order
  Tensor key_blocks;     // [G·T²] i64: flat index into the padded P×P map of each group's keys
  Tensor off_image;      // [G, 1, T²] bool: true for zero-padded keys outside the image
};

WindowIndex build_window_index(int64_t nx, int64_t w, int64_t side, Device device) {
  const int64_t T = w + 2 * side, P = nx + 2 * side, groups = nx / w, N = nx * nx;
  std::vector<int64_t> order(static_cast<size_t>(N)), inverse(static_cast<size_t>(N));
  std::vector<int64_t> keys(static_cast<size_t>(groups * groups * T * T));
  std::vector<uint8_t> off(keys.size());
  int64_t j = 0, s = 0;
  for (int64_t gy = 0; gy < groups; ++gy) {
    for (int64_t gx = 0; gx < groups; ++gx) {
      for (int64_t qy = 0; qy < w; ++qy) {
        for (int64_t qx = 0; qx < w; ++qx, ++j) {
          const int64_t patch = (gy * w + qy) * nx + (gx * w + qx);
          order[size_t(j)] = patch;
          inverse[size_t(patch)] = j;
        }
      }
      // Padded-map coordinates (gy·w + ty, gx·w + tx) are image coordinates shifted by side.
      for (int64_t ty = 0; ty < T; ++ty) {
        for (int64_t tx = 0; tx < T; ++tx, ++s) {
          const int64_t py = gy * w + ty, px = gx * w + tx;
          keys[size_t(s)] = py * P + px;
          const int64_t iy = py - side, ix = px - side;
          off[size_t(s)] = (iy < 0 || iy >= nx || ix < 0 || ix >= nx) ? 1 : 0;
        }
      }
    }
  }
  WindowIndex idx;
  idx.query_order = tensor(order, {N}).to(device);
  idx.patch_to_slot = tensor(inverse, {N}).to(device);
  idx.key_blocks = tensor(keys, {int64_t(keys.size())}).to(device);
  std::vector<int64_t> off64(off.begin(), off.end());
  idx.off_image = ne(tensor(off64, {groups * groups, 1, T * T}), 0.0).to(device);
  return idx;
}

// Every s-th row and column of the patch map: [B, h, nx·nx, e] → [B, h, ⌈nx/s⌉², e] (the
// positions a stride-s convolution with "same" padding is centred on).
Tensor subsample_map(const Tensor& t, int64_t nx, int64_t s) {
  const int64_t B = t.size(0), h = t.size(1), e = t.size(3), ns = (nx + s - 1) / s;
  return t.reshape({B, h, nx, nx, e}).slice(2, 0, nx, s).slice(3, 0, nx, s).reshape({B, h, ns * ns, e});
}

}  // namespace

int64_t LongShortAttention2d::rpe_table_rows(int64_t window) {
  LSF_CHECK(window >= 2) << kOp << ": the RPE table needs window ≥ 2 (got w = " << window
                         << "; with w = 1 the official table and index map do not match, use rpe = false)";
  const int64_t w = window, p = w / 2;
  return 2 * (w + p - 1) * (2 * p + w + 1) + 1;
}

Tensor LongShortAttention2d::relative_position_index_for(int64_t window) {
  const int64_t rows = rpe_table_rows(window);  // validates w ≥ 2
  const int64_t w = window, p = w / 2, T = w + 2 * p, shift = w + p - 1, stride = w + 2 * p;
  std::vector<int64_t> index(size_t(w * w * T * T));
  size_t i = 0;
  for (int64_t qy = 0; qy < w; ++qy) {
    for (int64_t qx = 0; qx < w; ++qx) {
      for (int64_t ky = -p; ky < w + p; ++ky) {
        for (int64_t kx = -p; kx < w + p; ++kx, ++i) {
          // The row stride (w + 2p) is smaller than the 2(w+p)−1 distinct dx values: rows collide.
          index[i] = (qy - ky + shift) * stride + (qx - kx + shift);
          LSF_CHECK(index[i] >= 0 && index[i] < rows) << kOp << ": RPE index out of range (internal)";
        }
      }
    }
  }
  return tensor(index, {w * w, T * T});
}

LongShortAttention2d::LongShortAttention2d(const LongShortAttention2dOptions& options)
    : Attention("LongShortAttention2d"), options_(options) {
  const auto& o = options;
  LSF_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0)
      << kOp << ": dim = " << o.dim << " must be positive and divisible by heads = " << o.heads;
  LSF_CHECK(o.window >= 1) << kOp << ": window w = " << o.window << " must be ≥ 1";
  LSF_CHECK(o.rank >= 0) << kOp << ": rank r = " << o.rank << " must be ≥ 0";
  LSF_CHECK(o.projection_stride >= 1) << kOp << ": projection_stride = " << o.projection_stride << " must be ≥ 1";
  LSF_CHECK(!(o.rpe && o.window == 1))
      << kOp << ": w = 1 with rpe is unusable (the official table for p = ⌊w/2⌋ = 0 has 1 row but the window is "
      << "3×3 keys, §4.3); set rpe = false or use w ≥ 2";
  LSF_CHECK(o.attn_drop >= 0.0 && o.attn_drop <= 1.0 && o.proj_drop >= 0.0 && o.proj_drop <= 1.0)
      << kOp << ": dropout probabilities must lie in [0, 1], got attn_drop = " << o.attn_drop
      << ", proj_drop = " << o.proj_drop;
  head_dim_ = o.dim / o.heads;
  side_ = ls_geometry::half_window(o.window);  // the 1-D band's ext, in both directions
  span_ = ls_geometry::window_span(o.window);

  if (o.rpe) {
    local_relative_position_bias_table = register_parameter(
        "local_relative_position_bias_table", empty({rpe_table_rows(o.window), o.heads}));
    init::trunc_normal_(local_relative_position_bias_table, 0.0, 0.02);
    relative_position_index = register_buffer("relative_position_index", relative_position_index_for(o.window));
  }
  if (!o.external_projections) qkv = register_module("qkv", std::make_shared<Linear>(o.dim, 3 * o.dim, o.qkv_bias));
  attn_drop = register_module("attn_drop", std::make_shared<Dropout>(o.attn_drop));
  proj = register_module("proj", std::make_shared<Linear>(o.dim, o.dim));
  proj_drop = register_module("proj_drop", std::make_shared<Dropout>(o.proj_drop));
  if (o.rank > 0 && !o.external_projections) {
    to_dynamic_projection =
        register_module("to_dynamic_projection", std::make_shared<Linear>(o.dim, o.heads * o.rank));
  }
  if (o.dual_ln) {
    dual_ln_dp = register_module("dual_ln_dp", std::make_shared<LayerNorm>(o.dim, 1e-5));
    dual_ln_full = register_module("dual_ln_full", std::make_shared<LayerNorm>(o.dim, 1e-5));
  }

  for (const auto& lin : {qkv, proj, to_dynamic_projection}) {
    if (!lin) continue;
    init::trunc_normal_(lin->weight, 0.0, 0.02);
    if (lin->bias.defined()) init::zeros_(lin->bias);
  }
}

std::string LongShortAttention2d::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << options_.dim << ", heads=" << options_.heads << ", window=" << options_.window
     << ", rank=" << options_.rank << ", rpe=" << (options_.rpe ? "true" : "false") << ", span=" << span_;
  if (!options_.dual_ln) os << ", dual_ln=false";
  return os.str();
}

int64_t LongShortAttention2d::check_args(const Tensor& x, const AttentionArgs& args) const {
  const auto& o = options_;
  LSF_CHECK(x.defined()) << kOp << ": the input is undefined";
  LSF_CHECK(!args.mask.defined()) << kOp << ": a padding mask is not supported by the 2-D attention (leave args.mask undefined)";
  LSF_CHECK(!args.memory.defined()) << kOp << ": args.memory is for the causal attention; leave it undefined";
  LSF_CHECK(!args.relative_positions.defined() && !args.chunk_positions.defined())
      << kOp << ": args.relative_positions / chunk_positions are for the causal attention; leave them undefined";
  LSF_CHECK(!args.cls.defined() && !args.cls_only)
      << kOp << ": args.cls and cls_only are for the bidirectional attention; pass the global token as x's first row with num_global = 1";
  LSF_CHECK(args.num_global == 0 || args.num_global == 1)
      << kOp << ": num_global = " << args.num_global
      << " is not supported (0 or 1 global tokens; the official patch→global arithmetic is correct only for g = 1)";
  LSF_CHECK(args.height > 0 && args.width > 0)
      << kOp << ": set args.height and args.width (the patch map), got " << args.height << " × " << args.width;
  LSF_CHECK(args.height == args.width) << kOp << ": the patch map must be square, got height " << args.height
                                       << " × width " << args.width << "; resize or pad the input to a square map";
  const int64_t nx = args.height, w = o.window, g = args.num_global, N = nx * nx;
  LSF_CHECK(nx % w == 0) << kOp << ": the map side " << nx << " is not a multiple of the window w = " << w
                         << "; pad the map to " << (nx + w - 1) / w * w << " or choose w dividing " << nx;
  LSF_CHECK(x.dim() == 3 && x.size(1) == g + N && x.size(2) == o.dim)
      << kOp << ": x of shape " << x.shape() << " does not match [B, num_global + height·width, dim] = [B, " << g + N
      << ", " << o.dim << "]";
  LSF_CHECK(x.dtype() == kF32 || x.dtype() == kF64) << kOp << ": x must be f32 or f64, got " << x.dtype();
  return nx;
}

Tensor LongShortAttention2d::forward(const Tensor& x, const AttentionArgs& args) {
  ::lsf::nn::ModuleScope call_site(*this);
  profiler::PhaseScope phase("attention");
  LSF_CHECK(!options_.external_projections)
      << kOp << ": built with external_projections (no qkv / to_dynamic_projection): call forward_projected";
  const int64_t nx = check_args(x, args), g = args.num_global, N = nx * nx;
  TensorList qkv_parts = split(qkv->forward(x), options_.dim, 2);  // 3 × [B, g+N, C]
  Tensor logits;  // [B, Ns, h·r]
  if (options_.rank > 0) {
    Tensor patches = x.narrow(1, g, N);  // [B, N, C]
    if (options_.projection_stride > 1) {
      const int64_t s = options_.projection_stride;
      patches = patches.reshape({x.size(0), nx, nx, options_.dim}).slice(1, 0, nx, s).slice(2, 0, nx, s).reshape(
          {x.size(0), -1, options_.dim});
    }
    logits = to_dynamic_projection->forward(patches);
  }
  return forward_projected(qkv_parts[0], qkv_parts[1], qkv_parts[2], logits, args);
}

Tensor LongShortAttention2d::forward_projected(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                               const Tensor& projection_logits, const AttentionArgs& args) {
  const auto& o = options_;
  const int64_t nx = check_args(q_in, args), w = o.window, g = args.num_global, N = nx * nx;
  LSF_CHECK(k_in.defined() && v_in.defined() && k_in.shape() == q_in.shape() && v_in.shape() == q_in.shape() &&
            k_in.dtype() == q_in.dtype() && v_in.dtype() == q_in.dtype())
      << kOp << ": q, k and v must share one shape and dtype, got " << q_in.shape() << ", "
      << (k_in.defined() ? k_in.shape() : Shape{}) << " and " << (v_in.defined() ? v_in.shape() : Shape{});
  const int64_t B = q_in.size(0), h = o.heads, e = head_dim_, C = o.dim, r = o.rank, side = side_, T = span_;
  const int64_t stride = o.projection_stride, ns = (nx + stride - 1) / stride, Ns = ns * ns;  // compressed tokens
  LSF_CHECK(r == 0 ? !projection_logits.defined()
                   : (projection_logits.defined() && projection_logits.shape() == Shape{B, Ns, h * r} &&
                      projection_logits.dtype() == q_in.dtype()))
      << kOp << ": projection_logits must be [B, ⌈H/s⌉·⌈W/s⌉, h·r] = [" << B << ", " << Ns << ", " << h * r
      << "] (projection stride s = " << stride << ") of q's dtype when r > 0 and undefined when r = 0, got "
      << (projection_logits.defined() ? projection_logits.shape() : Shape{});
  const int64_t groups = (nx / w) * (nx / w), P = nx + 2 * side;
  const Device device = q_in.device();
  if (cached_side_len_ != nx || query_order_.device() != device) {
    WindowIndex built = build_window_index(nx, w, side, device);
    query_order_ = built.query_order;
    patch_to_slot_ = built.patch_to_slot;
    key_blocks_ = built.key_blocks;
    off_image_ = built.off_image;
    cached_side_len_ = nx;
  }
  const WindowIndex idx{query_order_, patch_to_slot_, key_blocks_, off_image_};

  // 1–2. q, k, v; q scaled by e^-1/2; LN_L over the full width for k and v of all tokens.
  Tensor q = split_heads(mul(q_in, 1.0 / std::sqrt(double(e))), h);  // [B, h, n, e]
  Tensor k = split_heads(dual_ln_full ? dual_ln_full->forward(k_in) : k_in, h);
  Tensor v = split_heads(dual_ln_full ? dual_ln_full->forward(v_in) : v_in, h);

  // 3. Global rows and patch rows.
  Tensor qp = q.narrow(2, g, N), kp = k.narrow(2, g, N), vp = v.narrow(2, g, N);  // [B, h, N, e]

  // Queries in group order: [B, h, G, w², e].
  Tensor qg = index_select(qp, 2, idx.query_order).view({B, h, groups, w * w, e});

  TensorList logits, values;  // slot blocks in the order [proj | window | global]

  // 4–5. Dynamic projection over the patch tokens.
  Tensor kbar, vbar;
  if (r > 0) {
    // projection_logits [B, Ns, h·r], column head·r + slot → P [B, h, r, Ns], softmax over tokens.
    Tensor pm = softmax(projection_logits.reshape({B, Ns, h, r}).permute({0, 2, 3, 1}), -1);
    capture(this, "proj", pm);
    auto compress = [&](const Tensor& t) {                                 // [B, h, N, e] → [B, h, r, e]
      Tensor kept = stride == 1 ? t : subsample_map(t, nx, stride);       // [B, h, Ns, e]
      Tensor merged = matmul(pm, kept).permute({0, 2, 1, 3}).reshape({B, r, C});
      return split_heads(dual_ln_dp ? dual_ln_dp->forward(merged) : merged, h);
    };
    kbar = compress(kp);
    vbar = compress(vp);
    logits.push_back(matmul(qg, kbar.unsqueeze(2).transpose(-1, -2)));  // [B, h, G, w², r]
    values.push_back(vbar.unsqueeze(2));                                // [B, h, 1, r, e]
  }

  // 6. Window: T×T key blocks of the zero-padded map, −∞ off the image, then the RPE bias.
  auto blocks_of = [&](const Tensor& t) {  // [B, h, N, e] → [B, h, G, T², e]
    Tensor padded = pad(t.reshape({B, h, nx, nx, e}), {0, 0, side, side, side, side});
    return index_select(padded.reshape({B, h, P * P, e}), 2, idx.key_blocks).view({B, h, groups, T * T, e});
  };
  Tensor kw = blocks_of(kp), vw = blocks_of(vp);
  Tensor wl = matmul(qg, kw.transpose(-1, -2));  // [B, h, G, w², T²]
  wl = masked_fill(wl, idx.off_image, -INFINITY);
  if (o.rpe) {
    Tensor bias = index_select(local_relative_position_bias_table, 0,
                               relative_position_index.to(device).reshape({w * w * T * T}));  // [w²T², h]
    bias = bias.view({w * w, T * T, h}).permute({2, 0, 1}).unsqueeze(1);                         // [h, 1, w², T²]
    wl = add(wl, bias.to(q_in.dtype()));
  }
  logits.push_back(wl);
  values.push_back(vw);

  // 7. Global keys (no bias).
  Tensor qgl, kgl, vgl;
  if (g > 0) {
    qgl = q.narrow(2, 0, g);
    kgl = k.narrow(2, 0, g);
    vgl = v.narrow(2, 0, g);                                             // [B, h, 1, e]
    logits.push_back(matmul(qg, kgl.unsqueeze(2).transpose(-1, -2)));  // [B, h, G, w², 1]
    values.push_back(vgl.unsqueeze(2));                                // [B, h, 1, 1, e]
  }

  // 8–9. One joint softmax, dropout, weighted sum of the three value sets.
  Tensor joint = softmax(cat(logits, -1), -1);  // [B, h, G, w², r + T² + g]
  if (capturing(this)) {  // in patch order: [B, h, N, r + T² + g]
    NoGradGuard no_grad;
    capture(this, "attention", index_select(joint.reshape({B, h, N, joint.size(-1)}), 2, idx.patch_to_slot));
  }
  Tensor probs = attn_drop->forward(joint);
  Tensor out;
  int64_t offset = 0;
  for (const Tensor& val : values) {
    const int64_t slots = val.size(3);
    Tensor term = matmul(probs.narrow(-1, offset, slots), val);  // [B, h, G, w², e]
    out = out.defined() ? add(out, term) : term;
    offset += slots;
  }
  out = index_select(out.reshape({B, h, N, e}), 2, idx.patch_to_slot);  // patch order [B, h, N, e]

  // 10. Global-token update: keys [k_g ; out_j], values [v_g ; out_j], softmax without dropout.
  Tensor all = out;
  if (g > 0) {
    Tensor new_g = global_token_update(qgl, kgl, vgl, out);  // [B, h, 1, e]
    all = cat({new_g, out}, 2);                              // [B, h, 1 + N, e]
  }

  // 11. Merge heads, output projection, dropout.
  return proj_drop->forward(proj->forward(merge_heads(all)));
}

}  // namespace lsf::nn
