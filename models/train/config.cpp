// Run config: JSON ↔ RunConfig, strict validation and --set overrides (see config.h).
//
// One field list drives both directions: visit_config() calls a FieldVisitor on every field
// (the common sections here, the family's sections through TaskSections::visit); JsonWriter
// writes each field at its dotted key, JsonReader reads it back. The schema is the JSON of the
// task's default RunConfig: a user document is checked against it key by key (unknown keys,
// JSON types), then merged over it, so every resolved config carries every key. JSON alone
// cannot tell a list of numbers of any length from a fixed pair or a list of strings (an empty
// default looks like either), so the keys of such lists are collected separately (ListKeys).
#include "lsformer/models/train/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "lsformer/engine/error.h"
#include "lsformer/engine/file_read.h"
#include "lsformer/models/train/config_checks.h"
#include "lsformer/models/train/task.h"

namespace lsf::train {
namespace {

using nlohmann::json;

// The JSON pointer of a dotted key; '~' and '/' inside a part are escaped (RFC 6901), so any
// text the user types makes a valid pointer (an unescaped '~' made nlohmann throw its own
// parse error instead of our "unknown key").
json::json_pointer pointer(const std::string& dotted) {
  std::string p;
  std::stringstream ss(dotted);
  for (std::string part; std::getline(ss, part, '.');) {
    p += "/";
    for (char c : part) p += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  }
  return json::json_pointer(p);
}

// Calls v on every field of the config, in the order config.json shows them.
void visit_config(RunConfig& c, FieldVisitor& v) {
  v.field("description", c.description);
  v.field("data.task", c.task);
  LSF_CHECK(c.sections.get() != nullptr) << "internal: a RunConfig without task sections";
  c.sections.get()->visit(v);
  OptimizerConfig& o = c.optimizer;
  v.field("optimizer.name", o.name, kOptimizerNames);
  v.field("optimizer.lr", o.lr);
  v.field("optimizer.betas", o.betas);
  v.field("optimizer.eps", o.eps);
  v.field("optimizer.weight_decay", o.weight_decay);
  v.field("optimizer.grad_clip", o.grad_clip);
  v.field("optimizer.no_decay", o.no_decay);
  ScheduleConfig& s = c.schedule;
  v.field("schedule.name", s.name, kScheduleNames);
  v.field("schedule.warmup_steps", s.warmup_steps);
  v.field("schedule.anneal", s.anneal, kAnnealNames);
  v.field("schedule.cycle_momentum", s.cycle_momentum);
  v.field("schedule.base_momentum", s.base_momentum);
  v.field("schedule.max_momentum", s.max_momentum);
  v.field("schedule.div_factor", s.div_factor);
  v.field("schedule.final_div_factor", s.final_div_factor);
  v.field("schedule.min_lr", s.min_lr);
  v.field("schedule.warmup_start_factor", s.warmup_start_factor);
  v.field("schedule.rebase", s.rebase);
  LoopConfig& t = c.train;
  v.field("train.steps", t.steps);
  v.field("train.batch_size", t.batch_size);
  v.field("train.eval_every", t.eval_every);
  v.field("train.eval_batches", t.eval_batches);
  v.field("train.log_every", t.log_every);
  v.field("train.checkpoint_every", t.checkpoint_every);
  v.field("train.tensorboard_every", t.tensorboard_every);
  v.field("train.seed", t.seed);
  v.field("train.threads", t.threads);
  v.field("train.non_finite", t.non_finite, kNonFiniteNames);
  v.field("train.precision", t.precision, kPrecisionNames);
  v.field("train.device", t.device);
  v.field("train.memory_limit", t.memory_limit);
}

// Writes every field at its dotted key.
class JsonWriter final : public FieldVisitor {
 public:
  json out = json::object();
  void field(const char* key, std::string& value) override { out[pointer(key)] = value; }
  void field(const char* key, bool& value) override { out[pointer(key)] = value; }
  void field(const char* key, int64_t& value) override { out[pointer(key)] = value; }
  void field(const char* key, uint64_t& value) override { out[pointer(key)] = value; }
  void field(const char* key, double& value) override { out[pointer(key)] = value; }
  void field(const char* key, std::array<double, 2>& value) override { out[pointer(key)] = value; }
  void field(const char* key, std::vector<std::string>& value) override { out[pointer(key)] = value; }
  void field(const char* key, std::vector<double>& value) override { out[pointer(key)] = value; }
  using FieldVisitor::field;

 protected:
  void enum_field(const char* key, int64_t& index, std::span<const char* const> names) override {
    LSF_CHECK(index >= 0 && size_t(index) < names.size()) << "internal: '" << key << "' holds enumerator " << index;
    out[pointer(key)] = names[size_t(index)];
  }
};

// Reads every field from a merged document whose JSON kinds were checked against the schema.
class JsonReader final : public FieldVisitor {
 public:
  JsonReader(const std::string& source, const json& doc) : source_(source), doc_(doc) {}
  void field(const char* key, std::string& value) override { value = at(key).get<std::string>(); }
  void field(const char* key, bool& value) override { value = at(key).get<bool>(); }
  void field(const char* key, int64_t& value) override {
    const json& v = at(key);
    // 2^63 and above parse as unsigned; get<int64_t> would wrap them to negative numbers.
    LSF_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
        << source_ << ": '" << key << "' = " << v.dump() << " is out of range (at most "
        << std::numeric_limits<int64_t>::max() << ")";
    value = v.get<int64_t>();
  }
  void field(const char* key, uint64_t& value) override {
    const json& v = at(key);
    LSF_CHECK(v.is_number_unsigned()) << source_ << ": '" << key << "' must be a non-negative integer, got " << v.dump();
    value = v.get<uint64_t>();
  }
  void field(const char* key, double& value) override { value = at(key).get<double>(); }
  void field(const char* key, std::array<double, 2>& value) override { value = at(key).get<std::array<double, 2>>(); }
  void field(const char* key, std::vector<std::string>& value) override { value = at(key).get<std::vector<std::string>>(); }
  void field(const char* key, std::vector<double>& value) override { value = at(key).get<std::vector<double>>(); }
  using FieldVisitor::field;

 protected:
  void enum_field(const char* key, int64_t& index, std::span<const char* const> names) override {
    index = parse_enum<int64_t>(at(key).get<std::string>(), names, source_ + ": '" + key + "'");
  }

 private:
  const json& at(const char* key) const { return doc_.at(pointer(key)); }
  const std::string& source_;
  const json& doc_;
};

// The dotted keys of the number-list fields (std::vector<double>).
class ListKeys final : public FieldVisitor {
 public:
  std::set<std::string> keys;
  void field(const char*, std::string&) override {}
  void field(const char*, bool&) override {}
  void field(const char*, int64_t&) override {}
  void field(const char*, uint64_t&) override {}
  void field(const char*, double&) override {}
  void field(const char*, std::array<double, 2>&) override {}
  void field(const char*, std::vector<std::string>&) override {}
  void field(const char* key, std::vector<double>&) override { keys.insert(key); }
  using FieldVisitor::field;

 protected:
  void enum_field(const char*, int64_t&, std::span<const char* const>) override {}
};

std::set<std::string> number_list_keys(const RunConfig& config) {
  RunConfig copy = config;
  ListKeys k;
  visit_config(copy, k);
  return k.keys;
}

json config_to_json(const RunConfig& config) {
  RunConfig copy = config;
  JsonWriter w;
  visit_config(copy, w);
  return w.out;
}

// The resolved defaults of a task: common sections, the task's name and its family's sections.
RunConfig default_config(const std::string& task) {
  RunConfig c;
  c.task = task;
  c.sections = SectionsHandle(task_family(task).default_sections(task));
  return c;
}

// What a JSON value is, in the words error messages use.
std::string kind_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Checks user value `v` at `key` against the schema's default `d`: same kind (an integer is a
// number; a number is not an integer), arrays of the same length and element kinds; a number
// list (`number_list`) is an array of numbers of any length.
void check_kind(const std::string& source, const std::string& key, const json& v, const json& d, bool number_list = false) {
  bool ok = false;
  std::string want;
  if (number_list) {
    want = "an array of numbers";
    ok = v.is_array();
    for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_number();
  } else if (d.is_boolean()) {
    ok = v.is_boolean(), want = "a boolean (true/false)";
  } else if (d.is_number_integer()) {
    ok = v.is_number_integer(), want = "an integer";
  } else if (d.is_number()) {
    ok = v.is_number(), want = "a number";
  } else if (d.is_string()) {
    ok = v.is_string(), want = "a string";
  } else if (d.is_array() && (d.empty() || d[0].is_string())) {
    want = "an array of strings";
    ok = v.is_array();
    for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_string();
  } else if (d.is_array()) {
    want = "an array of " + std::to_string(d.size()) + " numbers";
    ok = v.is_array() && v.size() == d.size();
    for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i].is_number();
  } else if (d.is_object()) {
    ok = v.is_object(), want = "an object";
  }
  LSF_CHECK(ok) << source << ": '" << key << "' must be " << want << ", got " << v.dump() << " (" << kind_name(v) << ")";
}

// Checks every key of `user` (at dotted prefix `prefix`) against `schema`, recursively;
// `lists` holds the number-list keys.
void check_against_schema(const std::string& source, const json& user, const json& schema, const std::string& prefix,
                          const std::set<std::string>& lists) {
  for (const auto& [k, v] : user.items()) {
    std::string key = prefix.empty() ? k : prefix + "." + k;
    if (!schema.contains(k)) {
      std::string known;
      for (const auto& [sk, sv] : schema.items()) known += (known.empty() ? "" : ", ") + sk;
      LSF_FAIL() << source << ": unknown key '" << key << "' (" << (prefix.empty() ? std::string("the top level") : "'" + prefix + "'")
                 << " has: " << known << ")";
    }
    const json& d = schema.at(k);
    check_kind(source, key, v, d, lists.count(key) > 0);
    if (d.is_object()) check_against_schema(source, v, d, key, lists);
  }
}

// An override split into its key and its value text.
std::pair<std::string, std::string> split_override(const std::string& assignment) {
  size_t eq = assignment.find('=');
  LSF_CHECK(eq != std::string::npos && eq > 0) << "--set expects key=value, got '" << assignment << "'";
  return {assignment.substr(0, eq), assignment.substr(eq + 1)};
}

// The value an override assigns, as JSON: parsed when it parses, else the text; a string-typed
// key always takes the text (unquoting a JSON string).
json override_value(const json& schema_value, const std::string& text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema_value.is_string() && !value.is_string()) value = text;  // plain text for string keys
  if (value.is_discarded()) value = text;                            // not JSON: a string (checked later)
  return value;
}

// Merges `patch` into `target`: objects key by key, recursively; any other value replaces.
void merge_object(json& target, const json& patch) {
  for (const auto& [k, v] : patch.items()) {
    if (v.is_object() && target.contains(k) && target[k].is_object()) merge_object(target[k], v);
    else target[k] = v;
  }
}

// Applies one "a.b=value" override to the user document.
void apply_override(json& user, const json& schema, const std::string& assignment) {
  auto [key, text] = split_override(assignment);
  LSF_CHECK(key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos && schema.contains(pointer(key)))
      << "--set: unknown key '" << key << "' (see configs/README.md for the schema)";
  const json& schema_value = schema.at(pointer(key));
  json value = override_value(schema_value, text);
  try {
    (void)value.dump();  // JSON text must be UTF-8; nlohmann throws a type_error on the first write otherwise
  } catch (const json::exception&) {
    LSF_FAIL() << "--set: the value of '" << key << "' is not valid UTF-8: '" << text << "'";
  }
  // Create the parents in the user document (the schema has them all).
  json* node = &user;
  std::stringstream ss(key);
  std::vector<std::string> parts;
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    json& child = (*node)[parts[i]];
    if (!child.is_object()) child = json::object();
    node = &child;
  }
  json& slot = (*node)[parts.back()];
  if (!schema_value.is_object()) {
    slot = value;
    return;
  }
  // A whole section (--set schedule='{"name": "constant"}') is merged key by key into what the
  // file and earlier --set's gave it. Replacing it dropped those values without a word (the
  // defaults came back, and `--set train={}` reset every train.* key); a merge changes exactly
  // the keys it names, as a --set of each would, so the existing object form keeps working.
  LSF_CHECK(value.is_object()) << "--set: '" << key << "' is a section: its value must be a JSON object of its keys, got '"
                               << text << "' (or set one key: --set " << key << "."
                               << (schema_value.empty() ? std::string("key") : schema_value.begin().key()) << "=...)";
  if (!slot.is_object()) slot = json::object();
  merge_object(slot, value);
}

// data.task as the user document and the overrides set it (default "listops").
std::string requested_task(const std::string& source, const json& user, const std::vector<std::string>& overrides) {
  std::string task = "listops";
  if (user.contains("data") && user["data"].is_object() && user["data"].contains("task")) {
    const json& t = user["data"]["task"];
    LSF_CHECK(t.is_string()) << source << ": 'data.task' must be a string, got " << t.dump() << " (" << kind_name(t) << ")";
    task = t.get<std::string>();
  }
  for (const std::string& o : overrides) {
    auto [key, text] = split_override(o);
    if (key == "data.task") task = override_value(json(""), text).get<std::string>();
  }
  const std::vector<std::string> known = task_names();
  if (std::find(known.begin(), known.end(), task) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    LSF_FAIL() << source << ": 'data.task' must be one of " << list << ", got \"" << task << "\"";
  }
  return task;
}

// ---- validation of the common sections, each check naming its key ----

void validate_common(const std::string& source, const RunConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  LSF_CHECK(o.lr > 0) << source << ": 'optimizer.lr' must be > 0, got " << o.lr;
  in_unit(source, "optimizer.betas[0]", o.betas[0]);
  in_unit(source, "optimizer.betas[1]", o.betas[1]);
  // Adam and AdamW divide by √v̂ + eps: with eps = 0 a parameter whose gradients have all been
  // zero so far (an embedding row no batch used yet) gets 0 / 0 = NaN at its first update.
  LSF_CHECK(o.eps > 0) << source << ": 'optimizer.eps' must be > 0 (the update divides by √v̂ + eps; with 0 a "
                       << "parameter whose gradients are still all zero would become NaN), got " << o.eps;
  at_least(source, "optimizer.weight_decay", o.weight_decay, 0);
  at_least(source, "optimizer.grad_clip", o.grad_clip, 0);
  for (const std::string& pattern : o.no_decay)
    LSF_CHECK(!pattern.empty()) << source << ": 'optimizer.no_decay' holds an empty pattern (it would match every parameter)";

  // Checked before the schedule, whose bounds are relative to it (train.steps = -5 used to be
  // reported as a warmup that is too long).
  at_least(source, "train.steps", double(c.train.steps), 1);
  const ScheduleConfig& s = c.schedule;
  at_least(source, "schedule.warmup_steps", double(s.warmup_steps), 0);
  in_unit(source, "schedule.base_momentum", s.base_momentum);
  in_unit(source, "schedule.max_momentum", s.max_momentum);
  LSF_CHECK(s.div_factor > 0) << source << ": 'schedule.div_factor' must be > 0, got " << s.div_factor;
  LSF_CHECK(s.final_div_factor > 0) << source << ": 'schedule.final_div_factor' must be > 0, got " << s.final_div_factor;
  at_least(source, "schedule.min_lr", s.min_lr, 0);
  LSF_CHECK(s.warmup_start_factor >= 0.0 && s.warmup_start_factor <= 1.0)
      << source << ": 'schedule.warmup_start_factor' must be in [0, 1], got " << s.warmup_start_factor;
  // Keys the chosen schedule does not read (config_checks.h check_key_read).
  {
    using K = ScheduleKind;
    const ScheduleConfig defaults = default_config(c.task).schedule;
    const std::string name = enum_name(s.name, kScheduleNames);
    auto check = [&](const char* key, bool differs, bool read, const char* readers) {
      check_key_read(source, std::string("schedule.") + key, differs, read, readers, "schedule.name", name);
    };
    const bool onecycle = s.name == K::OneCycle, cosine = s.name == K::WarmupCosine;
    // 0 is no warmup, what constant does.
    check("warmup_steps", s.warmup_steps != defaults.warmup_steps && s.warmup_steps != 0, s.name != K::Constant,
          "every schedule but constant (warmup_constant: a warmup, then constant)");
    check("anneal", s.anneal != defaults.anneal, onecycle, "onecycle only");
    check("cycle_momentum", s.cycle_momentum != defaults.cycle_momentum, onecycle, "onecycle only");
    check("base_momentum", s.base_momentum != defaults.base_momentum, onecycle, "onecycle only");
    check("max_momentum", s.max_momentum != defaults.max_momentum, onecycle, "onecycle only");
    check("div_factor", s.div_factor != defaults.div_factor, onecycle, "onecycle only");
    check("final_div_factor", s.final_div_factor != defaults.final_div_factor, onecycle, "onecycle only");
    check("min_lr", s.min_lr != defaults.min_lr, cosine || s.name == K::Linear, "warmup_cosine and linear only");
    check("warmup_start_factor", s.warmup_start_factor != defaults.warmup_start_factor, cosine, "warmup_cosine only");
    check("rebase", s.rebase != defaults.rebase, cosine, "warmup_cosine only");
  }
  if (s.name == ScheduleKind::WarmupCosine || s.name == ScheduleKind::Linear) {
    LSF_CHECK(s.min_lr <= o.lr) << source << ": 'schedule.min_lr' (" << s.min_lr << "), the floor the schedule decays to, "
                                << "must be ≤ 'optimizer.lr' (" << o.lr << ")";
  }
  if (s.name == ScheduleKind::OneCycle) {
    // PyTorch's first phase ends at step pct_start·steps − 1 = warmup − 1, which must be > 0.
    LSF_CHECK(s.warmup_steps >= 2 && s.warmup_steps < c.train.steps)
        << source << ": onecycle needs 2 ≤ 'schedule.warmup_steps' < 'train.steps' (pct_start = warmup/steps), got "
        << s.warmup_steps << " and " << c.train.steps;
  }
  if (s.name == ScheduleKind::WarmupCosine || s.name == ScheduleKind::Linear) {
    LSF_CHECK(s.warmup_steps < c.train.steps) << source << ": 'schedule.warmup_steps' (" << s.warmup_steps
                                              << ") must be < 'train.steps' (" << c.train.steps << ")";
  }

  const LoopConfig& t = c.train;
  at_least(source, "train.batch_size", double(t.batch_size), 1);
  at_least(source, "train.eval_every", double(t.eval_every), 0);
  at_least(source, "train.eval_batches", double(t.eval_batches), 0);
  at_least(source, "train.log_every", double(t.log_every), 1);
  at_least(source, "train.checkpoint_every", double(t.checkpoint_every), 0);
  at_least(source, "train.tensorboard_every", double(t.tensorboard_every), 0);
  at_least(source, "train.threads", double(t.threads), 0);
  LSF_CHECK(t.threads <= 4096) << source << ": 'train.threads' must be ≤ 4096, got " << t.threads;
  try {
    (void)Device(t.device);  // its syntax only: whether it exists is the run's question (run_device)
  } catch (const Error&) {
    LSF_FAIL() << source << ": 'train.device' must be \"cpu\", \"cuda\" or \"cuda:N\", got \"" << t.device << "\"";
  }
  LSF_CHECK(std::isfinite(t.memory_limit) && t.memory_limit >= 0)
      << source << ": 'train.memory_limit' must be a byte count ≥ 0 (0: the machine's available memory), got "
      << t.memory_limit;
}

}  // namespace

namespace {
RunConfig parse_config_checked(const std::string& json_text, const std::vector<std::string>& overrides,
                               const std::string& source) {
  json user;
  try {
    // JSON lets an object name a key twice and keeps the last; in a config the first would be
    // ignored without a word, so a repeated key is an error naming its dotted path.
    std::vector<std::string> path;            // per open object or array: the key being read ("" in arrays)
    std::vector<std::set<std::string>> seen;  // per open object or array: the keys read so far
    std::string repeated;
    const json::parser_callback_t track = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start:
        case json::parse_event_t::array_start:  // a level without keys: its path entry stays ""
          seen.emplace_back();
          break;
        case json::parse_event_t::key: {
          const std::string key = parsed.get<std::string>();
          path.resize(seen.size() - 1);  // the keys that lead to this object
          if (!seen.back().insert(key).second && repeated.empty()) {
            for (const std::string& p : path) repeated += p.empty() ? "" : p + ".";
            repeated += key;
          }
          path.push_back(key);
          break;
        }
        case json::parse_event_t::object_end:
        case json::parse_event_t::array_end:
          seen.pop_back();
          path.resize(seen.size());
          break;
        default:
          break;
      }
      return true;
    };
    user = json::parse(json_text, track, /*allow_exceptions=*/true, /*ignore_comments=*/true);
    LSF_CHECK(repeated.empty()) << source << ": key '" << repeated << "' is given twice (JSON would keep the last silently)";
  } catch (const json::parse_error& e) {
    LSF_FAIL() << source << ": not valid JSON: " << e.what();
  }
  LSF_CHECK(user.is_object()) << source << ": the config must be a JSON object, got " << kind_name(user);
  if (user.contains("data")) check_kind(source, "data", user["data"], json::object());
  const std::string task = requested_task(source, user, overrides);
  RunConfig c = default_config(task);
  const json schema = config_to_json(c);
  const std::set<std::string> lists = number_list_keys(c);
  check_against_schema(source, user, schema, "", lists);
  for (const std::string& o : overrides) {
    apply_override(user, schema, o);
    check_against_schema("--set " + o, user, schema, "", lists);  // its value, named by it (not by the file)
  }
  json merged = schema;
  merged.merge_patch(user);
  JsonReader reader(source, merged);
  visit_config(c, reader);
  validate_common(source, c);
  task_family(task).validate(source, c);
  return c;
}
}  // namespace

RunConfig parse_config(const std::string& json_text, const std::vector<std::string>& overrides, const std::string& source) {
  // Every check above names its key; an exception of the JSON library itself would be a case
  // they missed: it becomes an lsf::Error naming the config, not a raw "[json.exception...]".
  try {
    return parse_config_checked(json_text, overrides, source);
  } catch (const json::exception& e) {
    LSF_FAIL() << source << ": " << e.what();
  }
}

RunConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // Configs are a few KiB; the cap refuses a wrong file (a dataset, a checkpoint) at once.
  constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;
  return parse_config(read_regular_file(path, kMaxConfigBytes, "cannot read config file"), overrides, path);
}

std::string to_json(const RunConfig& config) { return config_to_json(config).dump(2) + "\n"; }

std::string default_config_json(const std::string& task) { return to_json(default_config(task)); }

Device run_device(const RunConfig& config) {
  const Device device(config.train.device);
  if (device.is_cpu()) return device;
  const int count = cuda_device_count();
  LSF_CHECK(device.index < count)
      << "'train.device' is \"" << config.train.device << "\" but "
      << (count == 0 ? std::string("no CUDA device is usable here (a build without the CUDA backend, no driver or no GPU: "
                                   "`lsf info` says which)")
                     : "this machine has " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s"))
      << "; --set train.device=cpu runs on the CPU";
  return device;
}

void validate_data_paths(const RunConfig& config) { task_family(config.task).check_data_paths(config); }

}  // namespace lsf::train
