// k3ctl grammar-check and `k3ctl bench grammar` (constrained decoding,
// shared/grammar/).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/base/json_file.h"
#include "shared/grammar/output_forms.h"
#include "shared/grammar/token_constraint.h"
#include "shared/tokenizer/tokenizer.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

// Ordered: enum and const objects keep the key order the schema declares.
StatusOr<ordered_json> read_schema_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(cat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return base::parse_ordered_json_file(ss.str(), path);
}

// One JSON text per stdin line -> true/false: whether the schema's constraint
// accepts it as the model would write it, then end of message.
void run_grammar_check(const std::string& model, const std::string& schema_path) {
  StatusOr<ordered_json> schema = read_schema_file(schema_path);
  if (!schema.ok()) return fail(msg(schema.status()));
  auto grammar = grammar::json_document_grammar(&*schema);
  if (!grammar.ok()) {
    std::fprintf(stderr, "k3ctl: %s\n", msg(grammar.status()).c_str());
    return set_exit_code(2);
  }
  StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::load(model);
  if (!tok.ok()) return fail(msg(tok.status()));
  auto vocab = grammar::VocabIndex::from_tokenizer(*tok);
  if (!vocab.ok()) return fail(msg(vocab.status()));
  const int32_t eom = vocab->control_id(3);
  auto constraint = grammar::Constraint::create(
      *grammar, std::make_shared<const grammar::VocabIndex>(std::move(*vocab)));
  std::string line;
  while (std::getline(std::cin, line)) {
    bool ok = false;
    auto ids = tok->encode(line);
    if (ids.ok()) {
      grammar::ConstraintState st(constraint);
      ok = true;
      for (int32_t id : *ids) {
        if (!st.accept(id).ok()) {
          ok = false;
          break;
        }
      }
      if (ok) {
        if (eom >= 0) {
          ok = st.accept(eom).ok() && st.finished();
        } else {  // a tokenizer without the control token: the symbol itself
          grammar::State next;
          ok = constraint->matcher().feed(st.state(), grammar::kSymEndOfMsg, &next) &&
               constraint->matcher().accepting(next);
        }
      }
    }
    print_line(ok ? "true" : "false");
  }
}

// ---- bench grammar --------------------------------------------------------

struct BenchFlags {
  std::string vocab;
  int tokens = 200;
  int sequences = 4;
  uint64_t seed = 1;
};

struct NamedSchema {
  std::string name;
  ordered_json schema;  // null: json_object
  enum class Form { kDocument, kToolCall, kThinking } form = Form::kDocument;
};

json twenty_properties() {
  json props = json::object();
  json required = json::array();
  const char* kinds[] = {"string", "integer", "boolean", "number"};
  for (int i = 0; i < 20; ++i) {
    const std::string name = cat("field_", i);
    json p = {{"type", kinds[i % 4]}};
    if (i % 4 == 0) p["maxLength"] = 32;
    if (i % 4 == 1) {
      p["minimum"] = 0;
      p["maximum"] = 100000;
    }
    props[name] = p;
    required.push_back(name);
  }
  return {{"type", "object"},
          {"properties", props},
          {"required", required},
          {"additionalProperties", false}};
}

const char* const kPerson = R"({"type":"object","properties":{"name":{"type":"string"},
   "age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string",
   "pattern":"^[a-z0-9._]+@[a-z0-9]+\\.[a-z]{2,4}$"},"tags":{"type":"array",
   "items":{"enum":["a","b","c"]},"maxItems":5}},"required":["name","age"],
   "additionalProperties":false})";

std::vector<NamedSchema> bench_schemas() {
  using Form = NamedSchema::Form;
  return {
      {"json_object", nullptr, Form::kDocument},
      {"person", json::parse(kPerson), Form::kDocument},
      {"twenty_properties", twenty_properties(), Form::kDocument},
      {"recursive_tree",
       json::parse(R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
         "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},
         "required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})"),
       Form::kDocument},
      {"tool_call_weather",
       json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":40},
         "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,
         "maximum":14}},"required":["city"]})"),
       Form::kToolCall},
      // Free reasoning on the think channel, then the person schema.
      {"thinking_person", json::parse(kPerson), Form::kThinking},
  };
}

// Microseconds to the nanosecond.
double round_us(double us) {
  return std::round(us * 1000) / 1000;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return round_us(
      v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))]);
}

StatusOr<std::shared_ptr<const grammar::Grammar>> bench_grammar(const NamedSchema& s) {
  grammar::OutputSpec spec;
  switch (s.form) {
    case NamedSchema::Form::kDocument:
      return grammar::json_document_grammar(s.schema.is_null() ? nullptr : &s.schema);
    case NamedSchema::Form::kToolCall:
      spec.tool_choice = grammar::OutputSpec::ToolChoice::kRequired;
      spec.tools.push_back({"get_weather", s.schema});
      break;
    case NamedSchema::Form::kThinking:
      spec.thinking = true;
      spec.body = grammar::OutputSpec::Body::kJsonSchema;
      spec.schema = s.schema;
      break;
  }
  return grammar::output_grammar(spec);
}

double load_average() {
  double load = 0;
  std::ifstream in("/proc/loadavg");
  in >> load;
  return load;
}

// This thread's CPU time in microseconds (unlike the wall clock, not
// stretched when other processes take the cores).
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Times one step: wall clock and thread CPU.
class StepTimer {
 public:
  StepTimer() : wall_(std::chrono::steady_clock::now()), cpu_(thread_cpu_us()) {}
  double wall_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall_)
        .count();
  }
  double cpu_us() const { return thread_cpu_us() - cpu_; }

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

// Per step: the mask's time, split by whether the state's mask was cached
// (warm) or computed (cold: the first time a state is seen).
struct StepTimes {
  std::vector<double> cold, warm, cold_cpu, warm_cpu;
  void add(const StepTimer& t, bool hit) {
    const double wall = t.wall_us(), cpu = t.cpu_us();
    (hit ? warm : cold).push_back(wall);
    (hit ? warm_cpu : cold_cpu).push_back(cpu);
  }
};

// One sequence under the constraint with uniformly random picks among the
// allowed ids (the picks walk far more distinct states than a model would).
void run_sequence(const std::shared_ptr<const grammar::Constraint>& c, std::mt19937_64* rng,
                  int tokens, StepTimes* times) {
  grammar::ConstraintState st(c);
  std::vector<uint8_t> mask;
  std::vector<int32_t> allowed;
  for (int t = 0; t < tokens; ++t) {
    bool hit = false;
    const StepTimer timer;
    const int64_t n = st.mask(tokens - t, &mask, &hit);
    times->add(timer, hit);
    if (n == 0) break;
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
    const int32_t pick = allowed[(*rng)() % allowed.size()];
    if (!st.accept(pick).ok() || st.finished()) break;
  }
}

ordered_json times_json(const StepTimes& t) {
  auto max_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : round_us(*std::max_element(v.begin(), v.end()));
  };
  return {{"cold_p50_us", percentile(t.cold, 0.5)},
          {"cold_p99_us", percentile(t.cold, 0.99)},
          {"cold_max_us", max_of(t.cold)},
          {"warm_p50_us", percentile(t.warm, 0.5)},
          {"warm_p99_us", percentile(t.warm, 0.99)},
          {"warm_max_us", max_of(t.warm)},
          {"cold_cpu_p50_us", percentile(t.cold_cpu, 0.5)},
          {"cold_cpu_p99_us", percentile(t.cold_cpu, 0.99)},
          {"warm_cpu_p50_us", percentile(t.warm_cpu, 0.5)},
          {"warm_cpu_p99_us", percentile(t.warm_cpu, 0.99)},
          {"cold_steps", t.cold.size()},
          {"warm_steps", t.warm.size()}};
}

// A batch of 4 constrained requests in one step: four sequences (two
// schemas, separate constraints) each take a mask per step; the step's time
// is the sum. The cold pass meets every state first; the warm pass replays
// the same picks (a step is warm only if all four masks were cached).
void run_batch(const std::shared_ptr<const grammar::VocabIndex>& vocab, const BenchFlags& flags) {
  std::vector<std::shared_ptr<const grammar::Constraint>> batch;
  const auto all = bench_schemas();
  for (int i = 0; i < 4; ++i) {
    auto g = bench_grammar(all[static_cast<size_t>(1 + i % 2)]);
    if (!g.ok()) return fail(msg(g.status()));
    batch.push_back(grammar::Constraint::create(*g, vocab));
  }
  for (const char* phase : {"cold", "warm"}) {
    std::mt19937_64 rng(flags.seed);
    std::vector<grammar::ConstraintState> states;
    for (const auto& c : batch) states.emplace_back(c);
    StepTimes times;
    std::vector<std::vector<uint8_t>> masks(batch.size());
    std::vector<bool> done(batch.size(), false);
    for (int t = 0; t < flags.tokens; ++t) {
      bool all_hit = true;
      const StepTimer timer;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (done[i]) continue;
        bool hit = false;
        states[i].mask(flags.tokens - t, &masks[i], &hit);
        all_hit = all_hit && hit;
      }
      times.add(timer, all_hit);
      bool any = false;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (done[i]) continue;
        std::vector<int32_t> allowed;
        for (size_t k = 0; k < masks[i].size(); ++k)
          if (masks[i][k]) allowed.push_back(static_cast<int32_t>(k));
        if (allowed.empty() || !states[i].accept(allowed[rng() % allowed.size()]).ok() ||
            states[i].finished()) {
          done[i] = true;
        } else {
          any = true;
        }
      }
      if (!any) break;
    }
    ordered_json line = {{"metric", "grammar_mask_batch4"},
                         {"pass", phase},
                         {"schemas", {all[1].name, all[2].name, all[1].name, all[2].name}},
                         {"vocab", vocab->vocab_size()}};
    line.update(times_json(times));
    print_line(line.dump());
  }
}

void run_bench_grammar(const BenchFlags& flags) {
  StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::load(flags.vocab);
  if (!tok.ok()) return fail(msg(tok.status()));
  // The ranks, then the four XTML control tokens appended.
  std::vector<std::string> bytes(static_cast<size_t>(tok->num_ranks()) + 4);
  for (tokenizer::TokenId id = 0; id < tok->num_ranks(); ++id)
    bytes[static_cast<size_t>(id)] = std::string(tok->token_bytes(id));
  const int32_t base = tok->num_ranks();
  const auto v0 = std::chrono::steady_clock::now();
  auto vocab = std::make_shared<const grammar::VocabIndex>(
      grammar::VocabIndex::build(bytes, {base, base + 1, base + 2, base + 3}));
  print_line(ordered_json({{"metric", "grammar_vocab_index"},
                           {"vocab", vocab->vocab_size()},
                           {"control_tokens", {base, base + 1, base + 2, base + 3}},
                           {"build_ms", std::chrono::duration<double, std::milli>(
                                            std::chrono::steady_clock::now() - v0)
                                            .count()},
                           {"load1", load_average()}})
                 .dump());
  std::mt19937_64 rng(flags.seed);
  for (const NamedSchema& s : bench_schemas()) {
    const auto c0 = std::chrono::steady_clock::now();
    auto g = bench_grammar(s);
    if (!g.ok()) return fail(cat(s.name, ": ", msg(g.status())));
    auto constraint = grammar::Constraint::create(*g, vocab);
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    StepTimes times;
    for (int r = 0; r < flags.sequences; ++r) run_sequence(constraint, &rng, flags.tokens, &times);
    ordered_json line = {{"metric", "grammar_mask"},
                         {"schema", s.name},
                         {"vocab", vocab->vocab_size()},
                         {"compile_ms", compile_ms}};
    line.update(times_json(times));
    line["cached_states"] = constraint->cache_size();
    print_line(line.dump());
  }
  run_batch(vocab, flags);
}

void add_commands(CLI::App& app) {
  auto* check = app.add_subcommand(
      "grammar-check",
      "Reads one JSON text per stdin line and prints true/false: whether the constraint compiled "
      "from the schema accepts it as the model would emit it (exit 2: the schema uses a keyword "
      "that is not supported)");
  auto model = std::make_shared<std::string>();
  auto schema = std::make_shared<std::string>();
  check->add_option("--model", *model, "model directory (its tokenizer)")->required();
  check->add_option("--schema", *schema, "JSON Schema file")->required();
  check->callback([model, schema] { run_grammar_check(*model, *schema); });

  auto* bench = bench_command(app)->add_subcommand(
      "grammar",
      "Constrained-decoding mask cost on a vocabulary (+ the 4 XTML control tokens): us per "
      "token p50/p99 cold (a state's first mask) and warm (cached), compile ms, per named "
      "schema and for a batch of 4 requests per step; JSON lines");
  auto flags = std::make_shared<BenchFlags>();
  bench
      ->add_option("--vocab", flags->vocab,
                   "tiktoken.model file, tokenizer.json or model directory (e.g. o200k_base: "
                   "tests/node/ranks.cjs writes it)")
      ->required();
  bench->add_option("--tokens", flags->tokens, "tokens per sequence")->check(CLI::Range(1, 100000));
  bench->add_option("--sequences", flags->sequences, "sequences per schema (sharing its cache)")
      ->check(CLI::Range(1, 10000));
  bench->add_option("--seed", flags->seed, "random picks among the allowed tokens");
  bench->callback([flags] { run_bench_grammar(*flags); });
}

const CommandRegistrar registrar(add_commands);

}  // namespace
}  // namespace k3::tools
