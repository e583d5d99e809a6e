#include "shared/checkpoint/stop_tokens.h"
#include "shared/base/json_file.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/chat/segment.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;

StatusOr<json> parse_object(std::string_view text, std::string_view name) {
  K3_ASSIGN_OR_RETURN(json j, base::parse_json_file(text, name));
  if (!j.is_object()) return absl::InvalidArgumentError(cat(name, ": not a JSON object"));
  return j;
}

// The member `key` of `obj`; null when absent or JSON null.
const json* member(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string excerpt(std::string_view s) {
  return s.size() <= 40 ? std::string(s) : cat(s.substr(0, 40), "...");
}

// The ids the rule may name: [0, vocab), `vocab` the model's.
struct Vocab {
  int64_t size = std::numeric_limits<int32_t>::max();
  std::string source;  // where `size` comes from, for messages

  std::string range() const { return cat("outside the vocabulary [0, ", size, ")", source); }
};

// Adds the id or ids at `obj`.eos_token_id to *out; `key` names it in
// messages (text_config.eos_token_id, say).
Status add_eos_ids(const json& obj, std::string_view file, const std::string& key,
                   const Vocab& vocab, std::vector<int32_t>* out) {
  const json* v = member(obj, "eos_token_id");
  if (v == nullptr) return absl::OkStatus();
  auto add = [&](const json& e, const std::string& where) -> Status {
    if (!e.is_number_integer())
      return absl::InvalidArgumentError(
          cat(file, ": ", where, " must be a token id (an integer), not ", excerpt(e.dump())));
    const bool in_range = e.is_number_unsigned()
                              ? e.get<uint64_t>() < uint64_t(vocab.size)
                              : e.get<int64_t>() >= 0 && e.get<int64_t>() < vocab.size;
    if (!in_range)
      return absl::InvalidArgumentError(
          cat(file, ": ", where, ": ", e.dump(), " is ", vocab.range()));
    out->push_back(static_cast<int32_t>(e.get<int64_t>()));
    return absl::OkStatus();
  };
  if (!v->is_array()) {
    if (!v->is_number_integer())
      return absl::InvalidArgumentError(
          cat(file, ": ", key, " must be a token id or a list of token ids"));
    return add(*v, key);
  }
  for (size_t i = 0; i < v->size(); ++i) K3_RETURN_IF_ERROR(add((*v)[i], cat(key, "[", i, "]")));
  return absl::OkStatus();
}

// config.json's vocab_size (text_config first, then the root), if it has one.
StatusOr<std::optional<int64_t>> config_vocab_size(const json& root, const json* text_config,
                                                   std::string_view file) {
  for (const auto& [obj, key] :
       {std::pair{text_config, "text_config.vocab_size"}, std::pair{&root, "vocab_size"}}) {
    if (obj == nullptr) continue;
    const json* v = member(*obj, "vocab_size");
    if (v == nullptr) continue;
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 ||
        v->get<int64_t>() > std::numeric_limits<int32_t>::max())
      return absl::InvalidArgumentError(cat(file, ": ", key, " must be a positive token count"));
    return std::optional<int64_t>(v->get<int64_t>());
  }
  return std::optional<int64_t>();
}

// tokenizer_config.json's eos_token: a string, or an added-token object with
// a string `content`; nullopt when absent.
StatusOr<std::optional<std::string>> eos_token_content(std::string_view text,
                                                       std::string_view file) {
  K3_ASSIGN_OR_RETURN(json j, parse_object(text, file));
  const json* v = member(j, "eos_token");
  if (v == nullptr) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->get<std::string>());
  if (v->is_object()) {
    const json* content = member(*v, "content");
    if (content != nullptr && content->is_string())
      return std::optional<std::string>(content->get<std::string>());
  }
  return absl::InvalidArgumentError(
      cat(file, ": eos_token must be a string or an object with a string 'content'"));
}

}  // namespace

bool StopTokens::contains(int32_t id) const {
  return std::binary_search(ids.begin(), ids.end(), id);
}

std::string StopTokens::summary() const {
  std::string s;
  for (int32_t id : ids) s += s.empty() ? cat(id) : cat(", ", id);
  return s.empty() ? "none" : s;
}

StatusOr<StopTokens> stop_tokens(const StopTokenFiles& files,
                                 const tokenizer::Tokenizer* tokenizer) {
  std::optional<json> config;
  const json* text_config = nullptr;
  Vocab vocab;
  if (tokenizer != nullptr) {
    vocab.size = tokenizer->vocab_size();
    vocab.source = " of the tokenizer";
  }
  if (files.config_json) {
    K3_ASSIGN_OR_RETURN(config, parse_object(*files.config_json, files.config_name));
    if (const json* tc = member(*config, "text_config")) {
      if (!tc->is_object())
        return absl::InvalidArgumentError(cat(files.config_name, ": text_config is not an object"));
      text_config = tc;
    }
    K3_ASSIGN_OR_RETURN(std::optional<int64_t> size,
                        config_vocab_size(*config, text_config, files.config_name));
    if (size) {
      vocab.size = *size;
      vocab.source = cat(" (", files.config_name, "'s vocab_size)");
    }
  }

  StopTokens out;
  // config.json: the published layout names the eos at the root and in
  // text_config (the text model's own config) alike.
  if (config) {
    K3_RETURN_IF_ERROR(add_eos_ids(*config, files.config_name, "eos_token_id", vocab, &out.ids));
    if (text_config != nullptr)
      K3_RETURN_IF_ERROR(add_eos_ids(*text_config, files.config_name, "text_config.eos_token_id",
                                     vocab, &out.ids));
  }
  if (files.generation_config_json) {
    K3_ASSIGN_OR_RETURN(json gen,
                        parse_object(*files.generation_config_json, files.generation_config_name));
    K3_RETURN_IF_ERROR(
        add_eos_ids(gen, files.generation_config_name, "eos_token_id", vocab, &out.ids));
  }

  // The tokenizer's: its eos_token, and the end of K3's turn.
  std::optional<std::string> eos_content;
  if (files.tokenizer_config_json) {
    K3_ASSIGN_OR_RETURN(
        eos_content, eos_token_content(*files.tokenizer_config_json, files.tokenizer_config_name));
  }
  if (tokenizer != nullptr) {
    auto add = [&](int32_t id, std::string_view what) -> Status {
      if (id >= vocab.size)
        return absl::InvalidArgumentError(cat(what, " is token ", id, ", ", vocab.range()));
      out.ids.push_back(id);
      return absl::OkStatus();
    };
    // The tokenizer resolves eos_token itself when it reads
    // tokenizer_config.json (tiktoken.model beside it); with a tokenizer.json
    // it does not, and the config's content is looked up here.
    std::optional<int32_t> eos = tokenizer->eos_id();
    if (!eos && eos_content) {
      eos = tokenizer->special_id(*eos_content);
      if (!eos)
        return absl::InvalidArgumentError(cat(files.tokenizer_config_name, ": eos_token '",
                                              excerpt(*eos_content),
                                              "' is not a token of the vocabulary"));
    }
    if (eos)
      K3_RETURN_IF_ERROR(add(*eos, cat(files.tokenizer_config_name, ": eos_token '",
                                       excerpt(std::string(tokenizer->token_bytes(*eos))), "'")));
    if (std::optional<int32_t> end = tokenizer->special_id(chat::kEndOfMsgToken))
      K3_RETURN_IF_ERROR(add(*end, chat::kEndOfMsgToken));
  }
  std::sort(out.ids.begin(), out.ids.end());
  out.ids.erase(std::unique(out.ids.begin(), out.ids.end()), out.ids.end());
  return out;
}

StatusOr<StopTokens> load_stop_tokens(const std::string& model_dir,
                                      const tokenizer::Tokenizer* tokenizer) {
  StopTokenFiles files;
  auto read = [&](const char* name, std::optional<std::string>* text,
                  std::string* label) -> Status {
    *label = cat(model_dir, "/", name);
    std::error_code ec;
    if (!std::filesystem::exists(*label, ec)) return absl::OkStatus();
    K3_ASSIGN_OR_RETURN(*text, base::read_small_file(*label, 16u << 20));
    return absl::OkStatus();
  };
  K3_RETURN_IF_ERROR(read("config.json", &files.config_json, &files.config_name));
  K3_RETURN_IF_ERROR(
      read("generation_config.json", &files.generation_config_json, &files.generation_config_name));
  K3_RETURN_IF_ERROR(
      read("tokenizer_config.json", &files.tokenizer_config_json, &files.tokenizer_config_name));
  return stop_tokens(files, tokenizer);
}

}  // namespace k3::checkpoint
