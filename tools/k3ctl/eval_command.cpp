// `k3ctl eval`: an A/B of two engine settings on one text, teacher-forced.
//
//   k3ctl eval --model DIR --text FILE --config-a "FLAGS" --config-b "FLAGS"
//              [--max-tokens N] [--engined PATH]
//
// FLAGS are `engined score` flags (split at white space), e.g.
// "--dense-bits 8" or "--expert-kernel float". Each side runs in its own
// engined process (kernels are chosen once per process, so K3_KERNELS=... in
// FLAGS' environment is not needed: give it to k3ctl). Prints one JSON object:
// the perplexity of the text under each side, the mean KL(a || b) of the
// next-token distributions, how often their argmax agrees, and each side's
// expert bytes per token (read from storage, and used: requests x expert size,
// with a chunk's repeated experts counted once).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/base/scratch_dir.h"
#include "shared/base/subprocess.h"
#include "shared/checkpoint/model_config.h"
#include "shared/tokenizer/tokenizer.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

using json = nlohmann::json;

struct EvalArgs {
  std::string model, text, config_a, config_b, engined;
  int64_t max_tokens = 512;
};

struct Side {
  std::vector<float> logits;  // [T, vocab]
  json stats;
};

std::vector<std::string> split_flags(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

StatusOr<Side> run_side(const EvalArgs& a, const std::string& label, const std::string& flags,
                        const std::string& ids, int64_t tokens, int64_t vocab,
                        const std::string& out_file) {
  std::vector<std::string> argv = {a.engined, "score", "--model", a.model,
                                   "--ids",   ids,     "--out",   out_file};
  for (const std::string& f : split_flags(flags)) {
    if (f == "--model" || f == "--ids" || f == "--out")
      return absl::InvalidArgumentError(
          cat("--config-", label, ": ", f, " is set by k3ctl eval itself"));
    argv.push_back(f);
  }
  K3_ASSIGN_OR_RETURN(base::ProcessResult r, base::run_process(argv));
  if (r.exit_code != 0)
    return absl::InvalidArgumentError(cat("--config-", label, " \"", flags,
                                          "\": engined score exited ", r.exit_code, ": ",
                                          r.err.substr(0, 2000)));
  Side side;
  // Its last line is the pass's statistics (one JSON object).
  std::string last = r.out;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  side.stats = json::parse(last, nullptr, false);
  if (side.stats.is_discarded() || !side.stats.contains("expert_bytes_read"))
    return absl::InternalError(cat("engined score printed no statistics: ", r.out));
  K3_ASSIGN_OR_RETURN(std::string bytes, base::read_small_file(out_file, 8ull << 30));
  const size_t want = static_cast<size_t>(tokens * vocab) * sizeof(float);
  if (bytes.size() != want)
    return absl::InternalError(
        cat(out_file, ": ", bytes.size(), " bytes of logits, expected ", want));
  side.logits.resize(static_cast<size_t>(tokens * vocab));
  std::memcpy(side.logits.data(), bytes.data(), want);
  return side;
}

// log-softmax of one row, in double.
std::vector<double> log_softmax(const float* x, int64_t n) {
  double m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - m);
  const double lse = m + std::log(s);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = x[i] - lse;
  return out;
}

Status run_eval(EvalArgs a) {
  if (a.engined.empty()) a.engined = base::self_exe_dir() + "/engined";
  K3_ASSIGN_OR_RETURN(checkpoint::ModelConfig c, checkpoint::load_model_config(a.model));
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(a.text, 256u << 20));
  K3_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load(a.model));
  K3_ASSIGN_OR_RETURN(auto ids, tok.encode(text));
  if (static_cast<int64_t>(ids.size()) > a.max_tokens)
    ids.resize(static_cast<size_t>(a.max_tokens));
  if (ids.size() < 2)
    return absl::InvalidArgumentError(
        cat(a.text, ": ", ids.size(), " token(s); eval needs at least 2 to predict one"));
  std::string id_list;
  for (auto id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  const int64_t T = static_cast<int64_t>(ids.size()), V = c.vocab_size;
  K3_ASSIGN_OR_RETURN(auto tmp, base::ScratchDir::create("k3eval"));
  K3_ASSIGN_OR_RETURN(Side sa, run_side(a, "a", a.config_a, id_list, T, V, tmp->file("a.f32")));
  K3_ASSIGN_OR_RETURN(Side sb, run_side(a, "b", a.config_b, id_list, T, V, tmp->file("b.f32")));

  double nll_a = 0, nll_b = 0, kl = 0;
  int64_t agree = 0;
  for (int64_t t = 0; t + 1 < T; ++t) {
    const float* xa = &sa.logits[static_cast<size_t>(t * V)];
    const float* xb = &sb.logits[static_cast<size_t>(t * V)];
    const auto la = log_softmax(xa, V), lb = log_softmax(xb, V);
    const size_t next = static_cast<size_t>(ids[static_cast<size_t>(t + 1)]);
    nll_a -= la[next];
    nll_b -= lb[next];
    double k = 0;
    for (int64_t i = 0; i < V; ++i)
      k += std::exp(la[static_cast<size_t>(i)]) *
           (la[static_cast<size_t>(i)] - lb[static_cast<size_t>(i)]);
    kl += k;
    agree += std::max_element(xa, xa + V) - xa == std::max_element(xb, xb + V) - xb;
  }
  const double n = static_cast<double>(T - 1);
  auto per_token = [&](const Side& s) {
    const double used =
        s.stats["expert_requests"].get<double>() * s.stats["expert_bytes"].get<double>();
    return json{{"expert_bytes_read_per_token", s.stats["expert_bytes_read"].get<double>() / T},
                {"expert_bytes_used_per_token", used / T},
                {"seconds", s.stats["seconds"]}};
  };
  json out = {{"tokens", T},
              {"predicted", T - 1},
              {"a", {{"flags", a.config_a}, {"perplexity", std::exp(nll_a / n)}}},
              {"b", {{"flags", a.config_b}, {"perplexity", std::exp(nll_b / n)}}},
              {"mean_kl_a_b", kl / n},
              {"argmax_agreement", static_cast<double>(agree) / n}};
  out["a"].update(per_token(sa));
  out["b"].update(per_token(sb));
  std::printf("%s\n", out.dump().c_str());
  return absl::OkStatus();
}

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval", "A/B two engine settings on a text: perplexity, KL, argmax agreement, bytes/token");
  cmd->add_option("--model", a->model, "model directory")->required();
  cmd->add_option("--text", a->text, "UTF-8 text file to run teacher-forced")->required();
  cmd->add_option("--config-a", a->config_a, "engined score flags of side A (may be empty)")
      ->required();
  cmd->add_option("--config-b", a->config_b, "engined score flags of side B (may be empty)")
      ->required();
  cmd->add_option("--max-tokens", a->max_tokens,
                  "use at most this many tokens of the text "
                  "(default 512)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--engined", a->engined, "engined binary (default: beside k3ctl)");
  cmd->callback([a] {
    if (Status s = run_eval(*a); !s.ok()) fail(msg(s));
  });
}

const CommandRegistrar kEval(add_eval_command);

}  // namespace
}  // namespace k3::tools
