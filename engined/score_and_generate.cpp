#include "engined/score_and_generate.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/checkpoint/stop_tokens.h"
#include "shared/tokenizer/tokenizer.h"

#include "shared/api/request_limits.h"
#include "shared/base/log.h"

namespace k3::engined {

using k3::experts::ExpertSourceStats;

StatusOr<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    int64_t v = 0;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') {
      v = v * 10 + (text[j] - '0');
      if (v > INT32_MAX) return absl::InvalidArgumentError(cat("token id too large at offset ", i));
      ++j;
    }
    if (j == i)
      return absl::InvalidArgumentError(
          cat("--ids: expected a comma-separated list of non-negative integers, found '",
              text.substr(i, 16), "' at offset ", i));
    ids.push_back(static_cast<int32_t>(v));
    if (j < text.size() && text[j] != ',')
      return absl::InvalidArgumentError(
          cat("--ids: unexpected character '", text.substr(j, 1), "' at offset ", j));
    i = j + 1;
    if (j + 1 == text.size()) return absl::InvalidArgumentError("--ids: trailing comma");
  }
  if (ids.empty()) return absl::InvalidArgumentError("empty prompt: --ids has no token ids");
  return ids;
}

Status run_score(const ScoreJob& job) {
  K3_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_ids(job.ids));
  K3_ASSIGN_OR_RETURN(auto model, Model::load(job.model_dir, job.extra_dirs, job.engine));
  K3_ASSIGN_OR_RETURN(auto experts, make_expert_source(job.experts, *model));
  auto seq = model->new_sequence();
  std::vector<float> logits;
  const auto t0 = std::chrono::steady_clock::now();
  K3_RETURN_IF_ERROR(
      model->forward(*experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream f(job.out, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(logits.data()),
          static_cast<std::streamsize>(logits.size() * sizeof(float)));
  f.close();
  if (!f) return absl::InternalError(cat(job.out, ": cannot write the logits"));
  // What the pass cost, for k3ctl eval: experts asked for and bytes read
  // (a chunk reads each distinct expert once).
  const ExpertSourceStats st = experts->stats();
  std::printf("%s\n", nlohmann::json({{"tokens", ids.size()},
                                      {"seconds", secs},
                                      {"expert_requests", st.requests},
                                      {"expert_hits", st.hits},
                                      {"expert_bytes_read", st.bytes_read},
                                      {"network_bytes", st.network_bytes},
                                      {"remote_messages", st.remote_messages},
                                      {"expert_bytes", model->config().expert_bytes()}})
                          .dump()
                          .c_str());
  return absl::OkStatus();
}

namespace {

// The prompt's ids from whichever form the job gives.
StatusOr<std::vector<int32_t>> prompt_ids(const GenerateJob& job, const tokenizer::Tokenizer* tok) {
  const int forms = !job.ids.empty() + !job.prompt.empty() + !job.chat.empty();
  if (forms != 1)
    return absl::InvalidArgumentError("give exactly one of --ids, --prompt and --chat");
  if (!job.ids.empty()) return parse_ids(job.ids);
  if (!job.prompt.empty()) return tok->encode(job.prompt);
  nlohmann::ordered_json request = {{"messages", {{{"role", "user"}, {"content", job.chat}}}},
                                    {"thinking", job.thinking}};
  K3_ASSIGN_OR_RETURN(chat::Segments segments, chat::render_chat(request));
  return chat::encode_segments(*tok, segments);
}

}  // namespace

Status run_generate(const GenerateJob& job) {
  using Clock = std::chrono::steady_clock;
  if (job.max_tokens < 0) return absl::InvalidArgumentError("--max-tokens must be >= 0");
  // The API's ranges (the gateway's), before the model loads; the flags set
  // no logit_bias, so the vocabulary does not matter here.
  K3_RETURN_IF_ERROR(api::validate_sampling(to_wire(job.sampling), /*vocab=*/0));
  // The tokenizer: for a text or chat prompt, and for the stop tokens (a
  // checkpoint without tokenizer files takes --ids and stops on its config
  // files' eos ids alone).
  std::optional<tokenizer::Tokenizer> tok;
  if (auto loaded = tokenizer::Tokenizer::load(job.model_dir); loaded.ok())
    tok = *std::move(loaded);
  else if (job.ids.empty() || !absl::IsNotFound(loaded.status()))
    return loaded.status();
  K3_ASSIGN_OR_RETURN(checkpoint::StopTokens model_stops,
                      checkpoint::load_stop_tokens(job.model_dir, tok ? &*tok : nullptr));
  K3_ASSIGN_OR_RETURN(std::vector<int32_t> ids, prompt_ids(job, tok ? &*tok : nullptr));
  K3_ASSIGN_OR_RETURN(auto model, Model::load(job.model_dir, job.extra_dirs, job.engine));
  K3_ASSIGN_OR_RETURN(auto experts, make_expert_source(job.experts, *model));
  const checkpoint::ModelConfig& c = model->config();
  std::vector<int64_t> stops(model_stops.ids.begin(), model_stops.ids.end());
  stops.insert(stops.end(), job.stop_ids.begin(), job.stop_ids.end());
  auto seq = model->new_sequence();
  Sampler sampler(job.sampling);
  std::vector<float> logits;

  const auto t0 = Clock::now();
  K3_RETURN_IF_ERROR(model->forward(*experts, *seq, ids, 1, &logits));
  const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const ExpertSourceStats after_prefill = experts->stats();

  std::vector<int32_t> out;
  const auto t1 = Clock::now();
  int64_t decoded = 0;
  while (static_cast<int64_t>(out.size()) < job.max_tokens) {
    const int32_t next = sampler.sample(logits.data(), c.vocab_size);
    out.push_back(next);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    if (static_cast<int64_t>(out.size()) == job.max_tokens) break;
    K3_RETURN_IF_ERROR(model->forward(*experts, *seq, {next}, 1, &logits));
    ++decoded;
  }
  const double decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
  const ExpertSourceStats end = experts->stats();

  std::string line = "ids:";
  for (int32_t id : out) line += " " + std::to_string(id);
  std::printf("%s\n", line.c_str());
  if (tok && !job.chat.empty()) {
    // The reply parsed structurally: think channel -> reasoning, response
    // channel -> content; control tokens never shown.
    K3_ASSIGN_OR_RETURN(auto parser, chat::OutputTokenParser::create(*tok, job.thinking));
    chat::ChatDelta all;
    for (int32_t id : out) K3_RETURN_IF_ERROR(parser.feed(id, &all));
    parser.finish(&all);
    std::printf("reasoning: %s\ncontent: %s\n",
                nlohmann::json(all.reasoning_content).dump().c_str(),
                nlohmann::json(all.content).dump().c_str());
  } else if (!job.prompt.empty()) {
    tokenizer::StreamDecoder dec(*tok, tokenizer::StreamDecoder::Specials::kSkip);
    std::string text;
    for (int32_t id : out) K3_RETURN_IF_ERROR(dec.feed(id, &text));
    dec.finish(&text);
    std::printf("text: %s\n", nlohmann::json(text).dump().c_str());
  }
  const double decode_bytes = static_cast<double>(end.bytes_read - after_prefill.bytes_read);
  const double decode_requests = static_cast<double>(end.requests - after_prefill.requests);
  const double decode_net = static_cast<double>(end.network_bytes - after_prefill.network_bytes);
  // Expert bytes the tokens used (experts asked for x expert size), whoever
  // read them: the network bytes are compared with these.
  const double used_per_token =
      decoded > 0 ? decode_requests / decoded * static_cast<double>(c.expert_bytes()) : 0.0;
  std::printf(
      "timing: prefill %.1f tok/s (%zu tokens, %.3f s), decode %.4f s/token (%lld tokens), "
      "expert bytes read per token %.0f (prefill %.0f), experts per token %.1f, "
      "expert cache hit rate %.3f\n",
      ids.size() / std::max(prefill_s, 1e-9), ids.size(), prefill_s,
      decoded > 0 ? decode_s / decoded : 0.0, static_cast<long long>(decoded),
      decoded > 0 ? decode_bytes / decoded : 0.0,
      static_cast<double>(after_prefill.bytes_read) / ids.size(),
      decoded > 0 ? decode_requests / decoded : 0.0,
      end.requests > 0 ? static_cast<double>(end.hits) / end.requests : 0.0);
  std::printf(
      "network: %.0f bytes per token (both directions, remote expertd), expert bytes used per "
      "token %.0f, ratio %.5f, stream messages sent %llu, experts re-issued %llu\n",
      decoded > 0 ? decode_net / decoded : 0.0, used_per_token,
      used_per_token > 0 ? decode_net / decoded / used_per_token : 0.0,
      static_cast<unsigned long long>(end.remote_messages),
      static_cast<unsigned long long>(end.reissued));
  // Speculative lookahead (engined/model/speculator.h) and top-p pruning.
  const SpeculationStats& sp = model->speculation();
  const uint64_t eb = c.expert_bytes();
  const uint64_t hidden = end.speculative_hits * eb;
  std::printf(
      "speculation: %s (input %s), recall moe_input %.3f layer_output %.3f, experts posted %llu, "
      "speculative bytes read %llu, hidden %llu, wasted %llu\n",
      sp.on ? "on" : "off", sp.input == 0 ? "moe_input" : "layer_output", sp.recall(0),
      sp.recall(1), static_cast<unsigned long long>(sp.posted),
      static_cast<unsigned long long>(end.speculative_bytes),
      static_cast<unsigned long long>(hidden),
      static_cast<unsigned long long>(
          end.speculative_bytes > hidden ? end.speculative_bytes - hidden : 0));
  const ForwardTimes& ft = model->times();
  std::printf("expert top-p: %.3f, experts pruned per token %.2f\n", model->options().expert_top_p,
              ft.tokens > 0 ? static_cast<double>(ft.experts_pruned) / ft.tokens : 0.0);
  std::printf(
      "time split: attention %.3f s, dense %.3f s, expert compute %.3f s, expert I/O wait %.3f s "
      "(%lld tokens)\n",
      ft.attention_seconds, ft.dense_seconds, ft.expert_compute_seconds, ft.expert_wait_seconds,
      static_cast<long long>(ft.tokens));
  return absl::OkStatus();
}

}  // namespace k3::engined
