// `lsf attention`: a checkpoint's model run on one example under an nn::CaptureScope, and the
// recorded attention of one layer and head turned into a SequencePicture or an ImagePicture
// (attention_map.h). Which picture, and how slots map onto keys, follows the module type of the
// layer (the capture contract in each attention header).
#include "lsformer/models/train/attention_map.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "lsformer/engine/error.h"
#include "lsformer/engine/parallel.h"
#include "lsformer/engine/safetensors.h"
#include "lsformer/models/attention/causal_long_short.h"
#include "lsformer/models/attention/full_attention.h"
#include "lsformer/models/attention/linformer.h"
#include "lsformer/models/attention/long_short.h"
#include "lsformer/models/attention/long_short_2d.h"
#include "lsformer/models/lm/causal_full_attention.h"
#include "lsformer/models/nn/capture.h"
#include "lsformer/models/train/attention_layout.h"
#include "lsformer/models/train/checkpoint.h"
#include "lsformer/models/train/svg_png.h"
#include "lsformer/models/train/task.h"
#include "lsformer/models/train/trainer.h"
#include "lsformer/models/vision/vil_attention.h"

namespace lsf::train {

namespace fs = std::filesystem;

namespace {

// One head of a recorded [B, h, rows, cols] tensor (batch row b) as doubles, row-major.
std::vector<double> head_matrix(const Tensor& t, int64_t b, int64_t head) {
  const Tensor m = t.select(0, b).select(0, head).to(kF64).contiguous();
  return m.to_vector<double>();
}

std::string percent(double x) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(0);
  os << 100.0 * x << "%";
  return os.str();
}

// The mean over queries of the attention mass in the keys panel and in the slots.
std::string shares_note(const SequencePicture& p) {
  if (p.slots == 0) return "";
  double on_keys = 0, on_slots = 0;
  for (double v : p.on_keys) on_keys += v;
  for (double v : p.on_slots) on_slots += v;
  const double total = on_keys + on_slots;
  if (total <= 0) return "";
  return "On average a query puts " + percent(on_keys / total) + " of its attention on " +
         (p.in_band.empty() ? "the tokens" : "its window") + " and " +
         percent(on_slots / total) + " on the " + std::to_string(p.slots) + " slots.";
}

// The first `keep` rows / columns of a [rows, cols] matrix.
std::vector<double> crop(const std::vector<double>& m, int64_t cols, int64_t keep_rows, int64_t keep_cols) {
  std::vector<double> out(static_cast<size_t>(keep_rows * keep_cols));
  for (int64_t i = 0; i < keep_rows; ++i)
    for (int64_t j = 0; j < keep_cols; ++j) out[size_t(i * keep_cols + j)] = m[size_t(i * cols + j)];
  return out;
}

SequencePicture long_short_picture(const nn::LongShortAttention& module, const nn::CaptureScope& cap,
                                   const std::string& path, const InspectedExample& ex, int64_t head) {
  const Tensor& a = cap.get(path + ".attention");  // [B, h, n, R + s]
  const auto& o = module.options();
  const int64_t n = a.size(2), L = std::min<int64_t>(int64_t(ex.tokens.size()), n), w = o.window, r = o.rank;
  const int64_t s = w > 0 ? bidirectional_window_span(w) : (r == 0 ? 1 : 0);
  const int64_t R = a.size(3) - s, cls = R - r;
  const std::vector<double> rows = head_matrix(a, ex.batch_row, head);
  SequencePicture p;
  p.queries = L;
  p.keys = L;
  p.key_labels = ex.tokens;
  p.key_labels.resize(size_t(L));
  // The window part [n, s] spread onto key positions, cropped to the real tokens.
  std::vector<double> window(static_cast<size_t>(n * s));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t u = 0; u < s; ++u) window[size_t(t * s + u)] = rows[size_t(t * (R + s) + R + u)];
  const std::vector<double> on_keys = scatter_to_keys(window, n, s, n, [&](int64_t t, int64_t u) {
    return w > 0 ? bidirectional_window_key(t, u, w, n) : t;  // w = 0: the self slot
  });
  p.on_keys = crop(on_keys, n, L, L);
  const std::vector<double> ones(static_cast<size_t>(n * s), 1.0);
  p.in_band = crop(scatter_to_keys(ones, n, s, n, [&](int64_t t, int64_t u) {
                     return w > 0 ? bidirectional_window_key(t, u, w, n) : t;
                   }),
                   n, L, L);
  p.slots = R;
  p.on_slots.resize(size_t(L * R));
  for (int64_t t = 0; t < L; ++t)
    for (int64_t i = 0; i < R; ++i) p.on_slots[size_t(t * R + i)] = rows[size_t(t * (R + s) + i)];
  p.pooling.assign(size_t(R * L), 0.0);
  if (cls > 0) p.slot_labels.push_back("CLS");
  if (r > 0) {
    const std::vector<double> P = head_matrix(cap.get(path + ".proj"), ex.batch_row, head);  // [r, n]
    for (int64_t i = 0; i < r; ++i) {
      p.slot_labels.push_back(std::string("P").append(std::to_string(i)));
      for (int64_t j = 0; j < L; ++j) p.pooling[size_t((cls + i) * L + j)] = P[size_t(i * n + j)];
    }
  }
  p.keys_title = w > 0 ? "window (w = " + std::to_string(w) + ", span " + std::to_string(s) + ")" : "own key";
  p.slots_title = (cls > 0 ? "CLS + " : "") + std::to_string(r) + " projection slots";
  p.notes.push_back("Long-short attention: every query's one softmax covers its window (the band) and the " +
                    std::to_string(R) + " global slots" + (cls > 0 ? " (the CLS first)" : "") +
                    "; a row of the two panels together sums to 1.");
  p.notes.push_back("P (rows sum to 1 over the tokens) is what each dynamic-projection slot averages into its key and value.");
  return p;
}

SequencePicture causal_picture(const nn::CausalLongShortAttention& module, const nn::CaptureScope& cap,
                               const std::string& path, const InspectedExample& ex, int64_t head) {
  const Tensor& a = cap.get(path + ".attention");  // [B, h, M, Nc + w]
  const Tensor& proj = cap.get(path + ".proj");    // [B, h, Nm + Nb, r, l]
  const auto& o = module.options();
  const int64_t M = a.size(2), w = o.window, Nc = a.size(3) - w, l = o.chunk_length, r = o.rank;
  const int64_t chunks = proj.size(2), C = chunks * l - M, K = C + M;
  LSF_CHECK(int64_t(ex.tokens.size()) == K) << "internal: " << ex.tokens.size() << " token labels for " << K << " keys";
  const std::vector<double> rows = head_matrix(a, ex.batch_row, head);
  const std::vector<double> P = proj.select(0, ex.batch_row).select(0, head).to(kF64).contiguous().to_vector<double>();
  SequencePicture p;
  p.queries = M;
  p.keys = K;
  p.query_offset = C;
  p.memory = C;
  p.key_labels = ex.tokens;
  std::vector<double> window(static_cast<size_t>(M * w));
  for (int64_t t = 0; t < M; ++t)
    for (int64_t j = 0; j < w; ++j) window[size_t(t * w + j)] = rows[size_t(t * (Nc + w) + Nc + j)];
  p.on_keys = scatter_to_keys(window, M, w, K, [&](int64_t t, int64_t j) { return causal_window_key(t, j, w, C); });
  p.in_band = scatter_to_keys(std::vector<double>(static_cast<size_t>(M * w), 1.0), M, w, K,
                              [&](int64_t t, int64_t j) { return causal_window_key(t, j, w, C); });
  p.slots = Nc;
  p.on_slots.resize(size_t(M * Nc));
  for (int64_t t = 0; t < M; ++t)
    for (int64_t i = 0; i < Nc; ++i) p.on_slots[size_t(t * Nc + i)] = rows[size_t(t * (Nc + w) + i)];
  p.pooling.assign(size_t(Nc * K), 0.0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t m = 0; m < r; ++m) {
      std::string label(k < C / l ? "m" : "b");
      label.append(std::to_string(k < C / l ? k : k - C / l));
      if (r > 1) label.append(".").append(std::to_string(m));
      p.slot_labels.push_back(label);
      for (int64_t i = 0; i < l; ++i) p.pooling[size_t((k * r + m) * K + k * l + i)] = P[size_t((k * r + m) * l + i)];
    }
  p.keys_title = "window (the last w = " + std::to_string(w) + " keys)";
  p.slots_title = std::to_string(Nc) + " chunk slots (m: memory, b: block)";
  p.notes.push_back("Causal long-short attention: query t sees its window of the w keys ending at t and the slots of the "
                    "chunks before its own (later chunks' slots stay 0); one softmax over both.");
  p.notes.push_back("P: each slot pools the l = " + std::to_string(l) + " tokens of its chunk (" + std::to_string(r) +
                    " slot(s) per chunk); the shaded keys are the memory of " + std::to_string(C) + " positions.");
  return p;
}

// Full attention [n, K] (K = n, or C + M for the char-LM's full baseline) and Linformer's slots.
// cls_token = 1: the layer's sequence starts with the CLS token (an LRA model pooled at the CLS
// joins it to the last layer's sequence as a token when its attention has no CLS slot); its row
// is left out and, for full attention, its column drawn as a slot.
SequencePicture dense_picture(const nn::Module& module, const nn::CaptureScope& cap, const std::string& path,
                              const InspectedExample& ex, int64_t head, int64_t cls_token) {
  const Tensor& a = cap.get(path + ".attention");
  const std::vector<double> rows = head_matrix(a, ex.batch_row, head);
  const int64_t Q = a.size(2), cols = a.size(3), c = cls_token;
  SequencePicture p;
  if (const auto* lin = dynamic_cast<const nn::LinformerAttention*>(&module)) {
    const int64_t L = std::min<int64_t>(int64_t(ex.tokens.size()), Q - c), k = cols, n = lin->options().max_seq_len;
    p.queries = L;
    p.keys = L;
    p.key_labels = ex.tokens;
    p.key_labels.resize(size_t(L));
    p.on_keys.assign(size_t(L * L), 0.0);
    p.slots = k;
    p.on_slots.assign(rows.begin() + c * k, rows.begin() + (c + L) * k);
    const Tensor E = lin->options().per_head ? lin->E.select(0, head) : lin->E;  // [k, n]
    const std::vector<double> e = E.to(kF64).contiguous().to_vector<double>();
    p.pooling.assign(size_t(k * L), 0.0);
    for (int64_t i = 0; i < k; ++i) {
      double z = 0;
      for (int64_t j = 0; j < L; ++j) z += std::fabs(e[size_t(i * n + c + j)]);
      for (int64_t j = 0; j < L; ++j)
        p.pooling[size_t(i * L + j)] = z > 0 ? std::fabs(e[size_t(i * n + c + j)]) / z : 0.0;
    }
    p.keys_title = "tokens (Linformer has no window)";
    p.slots_title = std::to_string(k) + " projected slots";
    p.pooling_title = "|E|, each row scaled to sum 1: what each slot mixes";
    p.notes.push_back("Linformer: every query attends only to the k slots E·K; E is a learned linear projection (signed), "
                      "drawn as |E|.");
    return p;
  }
  const int64_t memory = cols - Q;  // the char-LM's full baseline: [memory ; block] keys
  const int64_t L = memory > 0 ? Q : std::min<int64_t>(int64_t(ex.tokens.size()), Q - c), K = memory > 0 ? cols : L;
  p.queries = L;
  p.keys = K;
  p.memory = std::max<int64_t>(memory, 0);
  p.query_offset = p.memory;
  p.key_labels = ex.tokens;
  p.key_labels.resize(size_t(K));
  p.on_keys.resize(size_t(L * K));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < K; ++j) p.on_keys[size_t(i * K + j)] = rows[size_t((c + i) * cols + c + j)];
  if (c > 0) {
    p.slots = 1;
    p.slot_labels = {"CLS"};
    p.on_slots.resize(size_t(L));
    for (int64_t i = 0; i < L; ++i) p.on_slots[size_t(i)] = rows[size_t((c + i) * cols)];
    p.pooling.assign(size_t(K), 0.0);
    p.slots_title = "the CLS token";
  }
  p.keys_title = "full attention";
  p.notes.push_back(memory > 0 ? "Full attention over [memory ; block]: query t sees every memory position and the block up to t."
                               : "Full attention: every query over every token.");
  if (c > 0) p.notes.push_back("This last layer also attends to the CLS token, the first of its sequence (drawn as a slot).");
  return p;
}

// The smallest g ≥ 0 with n − g a perfect square (global tokens before a square patch map).
int64_t square_split(int64_t n, int64_t* side) {
  for (int64_t g = 0; g < n; ++g) {
    const int64_t s = int64_t(std::llround(std::sqrt(double(n - g))));
    if (s * s == n - g) {
      *side = s;
      return g;
    }
  }
  LSF_FAIL() << "attention map: " << n << " tokens do not form a square patch map";
}

ImagePicture image_picture(const nn::Module& module, const nn::CaptureScope& cap, const std::string& path,
                           const InspectedExample& ex, int64_t head, int64_t query) {
  const Tensor& a = cap.get(path + ".attention");
  const std::vector<double> rows = head_matrix(a, ex.batch_row, head);
  ImagePicture p;
  p.pixels = ex.pixels;
  p.height = ex.height;
  p.width = ex.width;
  p.channels = ex.channels;
  if (const auto* ls = dynamic_cast<const nn::LongShortAttention2d*>(&module)) {
    const auto& o = ls->options();
    const int64_t N = a.size(2), S = a.size(3), r = o.rank, T = window2d_span(o.window), g = S - r - T * T;
    const int64_t side = int64_t(std::llround(std::sqrt(double(N))));
    p.side = side;
    p.query = query < 0 ? (side / 2) * side + side / 2 : query;
    LSF_CHECK(p.query < N) << "--query " << p.query << " is out of range for this layer's " << side << "×" << side
                           << " patch map (0.." << N - 1 << ", row-major)";
    const double* row = &rows[size_t(p.query * S)];
    p.window.assign(size_t(N), 0.0);
    for (int64_t u = 0; u < T * T; ++u) {
      const int64_t key = window2d_key(p.query, u, o.window, side);
      if (key >= 0) p.window[size_t(key)] += row[r + u];
    }
    for (int64_t i = 0; i < g; ++i) p.global += row[r + T * T + i];
    if (r > 0) {
      const Tensor& proj = cap.get(path + ".proj");  // [B, h, r, Ns]
      LSF_CHECK(proj.size(3) == N) << "attention map: the projection of '" << path << "' pools " << proj.size(3)
                                   << " positions (projection stride > 1); only stride 1 is drawn";
      p.pooling = head_matrix(proj, ex.batch_row, head);
      p.slot_weights.assign(row, row + r);
      p.effective = effective_attention(p.window, p.slot_weights, p.pooling, N);
    }
    std::ostringstream os;
    os << "2-D long-short attention on the " << side << "×" << side << " map: window w = " << o.window << " (keys in a "
       << T << "×" << T << " block around the query's w×w group), r = " << r << " slots";
    if (g > 0) os << ", the global token (" << percent(p.global) << " of this query's attention)";
    os << ".";
    p.notes.push_back(os.str());
  } else {
    const int64_t n = a.size(2);
    int64_t side = 0;
    const auto* vil = dynamic_cast<const vision::ViLFullAttention*>(&module);
    int64_t g = vil != nullptr && vil->options().rpe ? vil->options().num_global : square_split(n, &side);
    if (side == 0) side = int64_t(std::llround(std::sqrt(double(n - g))));
    const int64_t N = side * side;
    p.side = side;
    p.query = query < 0 ? (side / 2) * side + side / 2 : query;
    LSF_CHECK(p.query < N) << "--query " << p.query << " is out of range for this layer's " << side << "×" << side
                           << " patch map (0.." << N - 1 << ", row-major)";
    const double* row = &rows[size_t((g + p.query) * n)];
    p.window.assign(row + g, row + n);
    for (int64_t i = 0; i < g; ++i) p.global += row[i];
    p.notes.push_back("Full attention on the " + std::to_string(side) + "×" + std::to_string(side) + " map" +
                      (g > 0 ? "; the global token gets " + percent(p.global) + " of this query's attention." : "."));
  }
  return p;
}

// A pixel task's sequence picture (LRA Image, Pathfinder: one token per pixel, row-major) for
// one query, drawn over its image: the window and the effective attention as maps, one map per
// projection slot, the CLS slot as the global token.
ImagePicture pixel_picture(const SequencePicture& s, const InspectedExample& ex, int64_t query) {
  const int64_t side = ex.width, N = side * side, S = s.slots;
  LSF_CHECK(ex.height == side && s.queries == N && s.keys == N)
      << "internal: a " << ex.height << "×" << ex.width << " pixel sequence drawn from a picture of " << s.queries
      << " queries × " << s.keys << " keys";
  ImagePicture p;
  p.pixels = ex.pixels;
  p.height = ex.height;
  p.width = ex.width;
  p.channels = ex.channels;
  p.side = side;
  p.query = query < 0 ? (side / 2) * side + side / 2 : query;
  LSF_CHECK(p.query < N) << "--query " << p.query << " is out of range for this " << side << "×" << side
                         << " image (0.." << N - 1 << ", the pixel, row-major)";
  p.window.assign(s.on_keys.begin() + p.query * N, s.on_keys.begin() + (p.query + 1) * N);
  const int64_t cls = !s.slot_labels.empty() && s.slot_labels.front() == "CLS" ? 1 : 0;
  if (cls) p.global = s.on_slots[size_t(p.query * S)];
  if (S > cls) {
    for (int64_t i = cls; i < S; ++i) p.slot_weights.push_back(s.on_slots[size_t(p.query * S + i)]);
    p.pooling.assign(s.pooling.begin() + cls * N, s.pooling.end());
    p.effective = effective_attention(p.window, p.slot_weights, p.pooling, N);
  }
  if (s.in_band.empty()) {
    p.notes = s.notes;  // full attention's own notes
  } else {
    p.notes.push_back("Long-short attention: one softmax over the query's " + s.keys_title + " and the " +
                      std::to_string(S) + " global slots" + (cls ? " (the CLS first)" : "") +
                      ": the window map, the slot weights" + (cls ? " and the CLS's share" : "") + " sum to 1.");
  }
  std::ostringstream os;
  os << "The " << side << "×" << side << " pixels are one sequence in row-major order"
     << (s.in_band.empty() ? "" : " (the window runs along it, wrapping at the ends of rows)") << "; the query is pixel "
     << p.query << " (row " << p.query / side << ", column " << p.query % side << ")";
  if (cls) os << "; the CLS gets " << percent(p.global) << " of its attention";
  os << ".";
  p.notes.push_back(os.str());
  return p;
}

std::string layer_list(const std::vector<std::string>& paths) {
  std::ostringstream os;
  for (size_t i = 0; i < paths.size(); ++i) os << (i ? ", " : "") << i << ": " << paths[i];
  return os.str();
}

}  // namespace

Svg attention_map(const std::string& checkpoint, const AttentionMapOptions& o) {
  LSF_CHECK(o.split == "train" || o.split == "dev" || o.split == "test")
      << "unknown split '" << o.split << "' (expected train, dev or test)";
  LSF_CHECK(fs::exists(checkpoint)) << "checkpoint '" << checkpoint << "' does not exist";
  RunConfig config = checkpoint_config(checkpoint, o.overrides);
  if (o.threads > 0) config.train.threads = o.threads;
  if (config.train.threads > 0) set_num_threads(int(config.train.threads));
  std::unique_ptr<Task> task = make_task(config);
  task->load_data({o.split});
  std::shared_ptr<nn::Module> model = task->build_model();
  load_checkpoint(checkpoint, *model, nullptr, /*restore_rng=*/false);
  nn::CaptureScope cap(*model);  // the task checks the index against its split's examples
  const InspectedExample ex = task->forward_example(*model, o.split, o.index);

  // The attention layers: modules that recorded "attention", in module order.
  std::vector<std::string> paths;
  std::vector<const nn::Module*> modules;
  for (const auto& [path, m] : model->named_modules())
    if (cap.contains(path + ".attention")) paths.push_back(path), modules.push_back(m.get());
  LSF_CHECK(!paths.empty()) << "the model of '" << checkpoint << "' recorded no attention (no attention layer ran)";
  LSF_CHECK(o.layer >= 0 && o.layer < int64_t(paths.size()))
      << "--layer " << o.layer << " is out of range: the model has " << paths.size() << " attention layers ("
      << layer_list(paths) << ")";
  const std::string& path = paths[size_t(o.layer)];
  const nn::Module& module = *modules[size_t(o.layer)];
  const int64_t cls_token = &module == ex.cls_token_attention ? 1 : 0;
  const int64_t heads = cap.get(path + ".attention").size(1);
  LSF_CHECK(o.head >= 0 && o.head < heads) << "--head " << o.head << " is out of range: layer " << o.layer << " ("
                                           << path << ") has " << heads << " heads (0.." << heads - 1 << ")";
  const std::string title = "Layer " + std::to_string(o.layer) + " (" + path + "), head " + std::to_string(o.head);

  // Every picture: the layer and head as its title, the example's description as its first note.
  auto framed = [&](auto picture) {
    picture.title = title;
    picture.notes.insert(picture.notes.begin(), ex.description);
    return picture;
  };
  if (!ex.pixels.empty() && !ex.pixel_sequence)  // vision models
    return draw_image_picture(framed(image_picture(module, cap, path, ex, o.head, o.query)));
  SequencePicture p;
  if (const auto* ls = dynamic_cast<const nn::LongShortAttention*>(&module)) {
    p = long_short_picture(*ls, cap, path, ex, o.head);
  } else if (const auto* causal = dynamic_cast<const nn::CausalLongShortAttention*>(&module)) {
    p = causal_picture(*causal, cap, path, ex, o.head);
  } else {
    p = dense_picture(module, cap, path, ex, o.head, cls_token);
  }
  // LRA's pixel tasks over their image (Linformer's k signed slots keep the sequence picture).
  if (ex.pixel_sequence && dynamic_cast<const nn::LinformerAttention*>(&module) == nullptr)
    return draw_image_picture(framed(pixel_picture(p, ex, o.query)));
  p = framed(std::move(p));
  if (const std::string s = shares_note(p); !s.empty()) p.notes.push_back(s);
  const int64_t query = o.query < 0 ? p.queries / 2 : o.query;
  LSF_CHECK(query < p.queries) << "--query " << query << " is out of range: this example has " << p.queries
                               << " queries (0.." << p.queries - 1 << ")";
  return draw_sequence_picture(p, query, o.max_cells);
}

void write_attention_map(const std::string& checkpoint, const AttentionMapOptions& options, const std::string& out) {
  const std::string ext = fs::path(out).extension().string();
  LSF_CHECK(ext == ".svg" || ext == ".png") << "the attention map is written as .svg or .png, got '" << ext << "' ('"
                                            << out << "')";
  const Svg svg = attention_map(checkpoint, options);
  if (ext == ".png") {
    write_svg_as_png(svg, out);
    return;
  }
  write_file_atomically(out, svg.str());
}

}  // namespace lsf::train
