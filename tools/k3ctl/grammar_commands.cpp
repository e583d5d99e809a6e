// k3ctl grammar-check and `k3ctl bench grammar` (constrained decoding,
// shared/grammar/).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/grammar/output_forms.h"
#include "shared/grammar/token_constraint.h"
#include "shared/tokenizer/tokenizer.h"
#include "tools/k3ctl/commands.h"

namespace k3::k3ctl {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

void print_line(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

StatusOr<json> read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(cat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(cat(path, " is not valid JSON"));
  return j;
}

// One JSON text per stdin line -> true/false: whether the schema's constraint
// accepts it as the model would write it, then end of message.
void run_grammar_check(const std::string& model, const std::string& schema_path) {
  StatusOr<json> schema = read_json_file(schema_path);
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
  uint64_t seed = 1;
};

struct NamedSchema {
  std::string name;
  json schema;  // null: json_object
  bool tools = false;
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

std::vector<NamedSchema> bench_schemas() {
  return {
      {"json_object", nullptr, false},
      {"person", json::parse(R"({"type":"object","properties":{"name":{"type":"string"},
         "age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string",
         "pattern":"^[a-z0-9._]+@[a-z0-9]+\\.[a-z]{2,4}$"},"tags":{"type":"array",
         "items":{"enum":["a","b","c"]},"maxItems":5}},"required":["name","age"],
         "additionalProperties":false})"),
       false},
      {"twenty_properties", twenty_properties(), false},
      {"recursive_tree",
       json::parse(R"({"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
         "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},
         "required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"})"),
       false},
      {"tool_call_weather",
       json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":40},
         "unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,
         "maximum":14}},"required":["city"]})"),
       true},
  };
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

StatusOr<std::shared_ptr<const grammar::Grammar>> bench_grammar(const NamedSchema& s) {
  if (!s.tools) return grammar::json_document_grammar(s.schema.is_null() ? nullptr : &s.schema);
  grammar::OutputSpec spec;
  spec.tool_choice = grammar::OutputSpec::ToolChoice::kRequired;
  spec.tools.push_back({"get_weather", s.schema});
  return grammar::output_grammar(spec);
}

// Generates under the constraint with random picks among the allowed ids,
// timing each step's mask; `rounds` sequences share the constraint (and its
// cache), so the first is cold and the later ones warm.
struct StepTimes {
  std::vector<double> cold, warm;
};

void run_sequence(const std::shared_ptr<const grammar::Constraint>& c, std::mt19937_64* rng,
                  int tokens, std::vector<double>* times) {
  grammar::ConstraintState st(c);
  std::vector<uint8_t> mask;
  std::vector<int32_t> allowed;
  for (int t = 0; t < tokens; ++t) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t n = st.mask(tokens - t, &mask);
    const auto t1 = std::chrono::steady_clock::now();
    times->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (n == 0) break;
    allowed.clear();
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
    const int32_t pick = allowed[(*rng)() % allowed.size()];
    if (!st.accept(pick).ok() || st.finished()) break;
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
  auto vocab = std::make_shared<const grammar::VocabIndex>(
      grammar::VocabIndex::build(bytes, {base, base + 1, base + 2, base + 3}));
  std::mt19937_64 rng(flags.seed);
  for (const NamedSchema& s : bench_schemas()) {
    const auto c0 = std::chrono::steady_clock::now();
    auto g = bench_grammar(s);
    if (!g.ok()) return fail(cat(s.name, ": ", msg(g.status())));
    auto constraint = grammar::Constraint::create(*g, vocab);
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    StepTimes times;
    run_sequence(constraint, &rng, flags.tokens, &times.cold);
    for (int r = 0; r < 3; ++r) run_sequence(constraint, &rng, flags.tokens, &times.warm);
    print_line(ordered_json({{"metric", "grammar_mask"},
                             {"schema", s.name},
                             {"vocab", vocab->vocab_size()},
                             {"compile_ms", compile_ms},
                             {"cold_p50_us", percentile(times.cold, 0.5)},
                             {"cold_p99_us", percentile(times.cold, 0.99)},
                             {"warm_p50_us", percentile(times.warm, 0.5)},
                             {"warm_p99_us", percentile(times.warm, 0.99)},
                             {"cold_steps", times.cold.size()},
                             {"warm_steps", times.warm.size()},
                             {"cached_states", constraint->cache_size()}})
                   .dump());
  }
  // A batch of 4 constrained requests in one step: four sequences (two
  // schemas, separate constraints) each take a mask per step; the step's time
  // is the sum.
  std::vector<std::shared_ptr<const grammar::Constraint>> batch;
  const auto all = bench_schemas();
  for (int i = 0; i < 4; ++i) {
    auto g = bench_grammar(all[static_cast<size_t>(1 + i % 2)]);
    if (!g.ok()) return fail(msg(g.status()));
    batch.push_back(grammar::Constraint::create(*g, vocab));
  }
  for (const char* phase : {"cold", "warm"}) {
    std::vector<grammar::ConstraintState> states;
    for (const auto& c : batch) states.emplace_back(c);
    std::vector<double> step_us;
    std::vector<uint8_t> mask;
    std::vector<bool> done(batch.size(), false);
    for (int t = 0; t < flags.tokens; ++t) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::vector<uint8_t>> masks(batch.size());
      for (size_t i = 0; i < batch.size(); ++i)
        if (!done[i]) states[i].mask(flags.tokens - t, &masks[i]);
      step_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
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
    print_line(ordered_json({{"metric", "grammar_mask_batch4"},
                             {"phase", phase},
                             {"schemas", {all[1].name, all[2].name}},
                             {"step_p50_us", percentile(step_us, 0.5)},
                             {"step_p99_us", percentile(step_us, 0.99)},
                             {"steps", step_us.size()}})
                   .dump());
  }
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
      "token p50/p99 cold and warm, compile ms, per named schema; JSON lines");
  auto flags = std::make_shared<BenchFlags>();
  bench
      ->add_option("--vocab", flags->vocab,
                   "tiktoken.model file, tokenizer.json or model directory (e.g. o200k_base: "
                   "tests/node/ranks.cjs writes it)")
      ->required();
  bench->add_option("--tokens", flags->tokens, "tokens per sequence")->check(CLI::Range(1, 100000));
  bench->add_option("--seed", flags->seed, "random picks among the allowed tokens");
  bench->callback([flags] { run_bench_grammar(*flags); });
}

const CommandRegistrar registrar(add_commands);

}  // namespace
}  // namespace k3::k3ctl
