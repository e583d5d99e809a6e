#include "shared/tokenizer/tokenizer_files.h"
#include "shared/base/json_file.h"

#include <array>
#include <charconv>
#include <filesystem>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"

namespace k3::tokenizer {
namespace {

using nlohmann::json;

// A short, printable excerpt of untrusted text for error messages.
std::string excerpt(std::string_view s) {
  constexpr size_t kMax = 48;
  std::string out;
  for (char c : s.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7F) ? c : '?';
  }
  if (s.size() > kMax) out += "...";
  return out;
}

// A non-negative decimal integer (digits only) up to `max`.
std::optional<int64_t> parse_index(std::string_view s, int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

constexpr int64_t kMaxId = std::numeric_limits<TokenId>::max() - 1;

StatusOr<json> parse_json(std::string_view text, std::string_view name) {
  return base::parse_json_file(text, name);
}

// An HF AddedToken serialization: a string, or an object with "content".
std::optional<std::string> token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

// Checks and records one added token.
Status add_token(TokenId id, AddedToken token, std::string_view name, TokenizerSpec* spec,
                 std::unordered_map<std::string, TokenId>* by_content) {
  if (token.content.empty()) {
    return absl::InvalidArgumentError(cat(name, ": added token ", id, " has no content"));
  }
  if (static_cast<size_t>(id) < spec->ranks.size()) {
    return absl::InvalidArgumentError(cat(name, ": added token ", id, " '", excerpt(token.content),
                                          "' collides with rank ", id, " (there are ",
                                          spec->ranks.size(), " BPE ranks)"));
  }
  if (spec->added.count(id) != 0) {
    return absl::InvalidArgumentError(cat(name, ": added token id ", id, " is given twice"));
  }
  auto [it, inserted] = by_content->emplace(token.content, id);
  if (!inserted) {
    return absl::InvalidArgumentError(cat(name, ": added tokens ", it->second, " and ", id,
                                          " have the same content '", excerpt(token.content), "'"));
  }
  spec->added.emplace(id, std::move(token));
  return absl::OkStatus();
}

// GPT-2's byte-level alphabet (bytes_to_unicode): the printable Latin-1 bytes
// stand for themselves, the other 68 bytes for U+0100 onwards, in byte order.
std::array<int, 324> byte_level_decoder() {
  std::array<int, 324> code_to_byte;
  code_to_byte.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code_to_byte[printable ? b : next++] = b;
  }
  return code_to_byte;
}

// Decodes a byte-level vocabulary key (UTF-8 of the mapped code points).
std::optional<std::string> byte_level_bytes(std::string_view key) {
  static const std::array<int, 324> kDecoder = byte_level_decoder();
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  size_t i = 0;
  while (i < key.size()) {
    uint32_t cp;
    if (p[i] < 0x80) {
      cp = p[i];
      i += 1;
    } else if ((p[i] & 0xE0) == 0xC0 && i + 1 < key.size()) {
      cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // every byte-level code point is below U+0800
    }
    if (cp >= kDecoder.size() || kDecoder[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(kDecoder[cp]));
  }
  return out;
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}
bool is_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// vocab_size from a config.json beside the tokenizer files, if there is one.
StatusOr<std::optional<int64_t>> vocab_size_in_dir(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!is_file(path)) return std::optional<int64_t>();
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path));
  return vocab_size_from_config_json(text);
}

}  // namespace

std::optional<std::string> base64_decode(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v;
    v.fill(-1);
    constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < kAlphabet.size(); ++i) {
      v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
    }
    return v;
  }();
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  if (text.back() == '=') ++padding;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
  if (padding == 1 && text.back() != '=') return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  const size_t data = text.size() - padding;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data; ++i) {
    const int8_t v = kValue[static_cast<unsigned char>(text[i])];
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

StatusOr<std::vector<std::string>> parse_tiktoken_model(std::string_view text,
                                                        std::string_view name) {
  std::vector<std::pair<int64_t, std::string>> entries;  // (rank, bytes) in line order
  std::vector<size_t> line_of_entry;
  std::unordered_map<int64_t, size_t> line_of_rank;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    const size_t rank_at = line.find_first_not_of(" \t", space);
    if (space == 0 || space == std::string_view::npos || rank_at == std::string_view::npos ||
        line.find_first_of(" \t", rank_at) != std::string_view::npos) {
      return absl::InvalidArgumentError(
          cat(name, " line ", line_no, ": expected 'BASE64 RANK', got '", excerpt(line), "'"));
    }
    const std::string_view token_text = line.substr(0, space);
    const std::string_view rank_text = line.substr(rank_at);
    std::optional<std::string> bytes = base64_decode(token_text);
    if (!bytes.has_value() || bytes->empty()) {
      return absl::InvalidArgumentError(
          cat(name, " line ", line_no, ": bad base64 '", excerpt(token_text), "'"));
    }
    const std::optional<int64_t> rank = parse_index(rank_text, kMaxId);
    if (!rank.has_value()) {
      return absl::InvalidArgumentError(
          cat(name, " line ", line_no, ": bad rank '", excerpt(rank_text), "'"));
    }
    auto [it, inserted] = line_of_rank.emplace(*rank, line_no);
    if (!inserted) {
      return absl::InvalidArgumentError(
          cat(name, " line ", line_no, ": rank ", *rank, " is already given on line ", it->second));
    }
    entries.emplace_back(*rank, std::move(*bytes));
    line_of_entry.push_back(line_no);
  }
  if (entries.empty()) return absl::InvalidArgumentError(cat(name, " has no ranks"));
  const size_t n = entries.size();
  std::vector<std::string> ranks(n);
  std::vector<bool> seen(n, false);
  int64_t highest = 0;
  for (auto& [rank, bytes] : entries) {
    highest = std::max(highest, rank);
    if (static_cast<size_t>(rank) < n) {
      seen[rank] = true;
      ranks[rank] = std::move(bytes);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (!seen[r]) {
      return absl::InvalidArgumentError(cat(name, ": ranks are not contiguous: no line gives rank ",
                                            r, " (", n, " ranks, the highest ", highest, ")"));
    }
  }
  return ranks;
}

Status parse_tokenizer_config(std::string_view json_text, TokenizerSpec* spec,
                              std::string_view name) {
  K3_ASSIGN_OR_RETURN(json config, parse_json(json_text, name));
  if (!config.is_object()) return absl::InvalidArgumentError(cat(name, " is not a JSON object"));
  std::unordered_map<std::string, TokenId> by_content;
  auto decoder = config.find("added_tokens_decoder");
  if (decoder != config.end() && !decoder->is_null()) {
    if (!decoder->is_object()) {
      return absl::InvalidArgumentError(cat(name, ": added_tokens_decoder is not an object"));
    }
    for (const auto& [key, value] : decoder->items()) {
      const std::optional<int64_t> id = parse_index(key, kMaxId);
      if (!id.has_value()) {
        return absl::InvalidArgumentError(
            cat(name, ": added_tokens_decoder key '", excerpt(key), "' is not a token id"));
      }
      std::optional<std::string> content = token_content(value);
      if (!content.has_value()) {
        return absl::InvalidArgumentError(
            cat(name, ": added token ", *id, " has no string 'content'"));
      }
      AddedToken token{std::move(*content), true};
      if (value.is_object()) {
        auto special = value.find("special");
        if (special != value.end() && special->is_boolean()) token.special = special->get<bool>();
      }
      K3_RETURN_IF_ERROR(
          add_token(static_cast<TokenId>(*id), std::move(token), name, spec, &by_content));
    }
  }
  for (auto [field, target] :
       {std::pair{"bos_token", &spec->bos_token}, std::pair{"eos_token", &spec->eos_token}}) {
    auto it = config.find(field);
    if (it != config.end() && !it->is_null()) *target = token_content(*it);
  }
  return absl::OkStatus();
}

StatusOr<TokenizerSpec> parse_hf_tokenizer_json(std::string_view json_text, std::string_view name) {
  K3_ASSIGN_OR_RETURN(json root, parse_json(json_text, name));
  const json* model = root.is_object() && root.contains("model") ? &root["model"] : nullptr;
  if (model == nullptr || !model->is_object() || !model->contains("vocab") ||
      !(*model)["vocab"].is_object()) {
    return absl::InvalidArgumentError(cat(name, ": no model.vocab object"));
  }
  if (model->contains("type") && (*model)["type"] != "BPE") {
    return absl::InvalidArgumentError(cat(name, ": model.type is not BPE"));
  }
  // Added tokens first: their ids are not ranks even when model.vocab lists them.
  std::vector<std::pair<TokenId, AddedToken>> added;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    if (!root["added_tokens"].is_array()) {
      return absl::InvalidArgumentError(cat(name, ": added_tokens is not a list"));
    }
    for (const json& t : root["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_unsigned() ||
          !t.contains("content") || !t["content"].is_string()) {
        return absl::InvalidArgumentError(
            cat(name, ": an added_tokens entry lacks an integer id or a string content"));
      }
      const uint64_t id = t["id"].get<uint64_t>();
      if (id > static_cast<uint64_t>(kMaxId)) {
        return absl::InvalidArgumentError(cat(name, ": added token id ", id, " is too large"));
      }
      AddedToken token{t["content"].get<std::string>(), true};
      if (t.contains("special") && t["special"].is_boolean())
        token.special = t["special"].get<bool>();
      added.emplace_back(static_cast<TokenId>(id), std::move(token));
    }
  }
  std::unordered_map<TokenId, const AddedToken*> added_by_id;
  for (const auto& [id, token] : added) added_by_id[id] = &token;

  std::vector<std::pair<int64_t, std::string>> entries;
  for (const auto& [key, value] : (*model)["vocab"].items()) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > static_cast<uint64_t>(kMaxId)) {
      return absl::InvalidArgumentError(
          cat(name, ": model.vocab entry '", excerpt(key), "' has no valid id"));
    }
    const auto id = static_cast<int64_t>(value.get<uint64_t>());
    auto a = added_by_id.find(static_cast<TokenId>(id));
    if (a != added_by_id.end() && a->second->content == key) continue;
    std::optional<std::string> bytes = byte_level_bytes(key);
    if (!bytes.has_value() || bytes->empty()) {
      return absl::InvalidArgumentError(cat(name, ": model.vocab entry '", excerpt(key), "' (id ",
                                            id, ") is not a byte-level token"));
    }
    entries.emplace_back(id, std::move(*bytes));
  }
  if (entries.empty()) return absl::InvalidArgumentError(cat(name, ": model.vocab is empty"));
  TokenizerSpec spec;
  const size_t n = entries.size();
  spec.ranks.resize(n);
  std::vector<bool> seen(n, false);
  for (auto& [id, bytes] : entries) {
    if (static_cast<size_t>(id) >= n || seen[id]) {
      return absl::InvalidArgumentError(
          cat(name, ": model.vocab ids are not contiguous 0..", n - 1, " (id ", id,
              seen.size() > static_cast<size_t>(id) ? " repeats)" : " is out of range)"));
    }
    seen[id] = true;
    spec.ranks[id] = std::move(bytes);
  }
  std::unordered_map<std::string, TokenId> by_content;
  for (auto& [id, token] : added) {
    K3_RETURN_IF_ERROR(add_token(id, std::move(token), name, &spec, &by_content));
  }
  return spec;
}

Status settle_vocab_size(std::optional<int64_t> vocab_size, bool kimi_layout, TokenizerSpec* spec) {
  const auto num_ranks = static_cast<int64_t>(spec->ranks.size());
  const int64_t past_added = spec->added.empty() ? 0 : spec->added.rbegin()->first + int64_t{1};
  if (vocab_size.has_value()) {
    if (*vocab_size < num_ranks) {
      return absl::InvalidArgumentError(
          cat("vocab_size ", *vocab_size, " is smaller than the ", num_ranks, " BPE ranks"));
    }
    if (*vocab_size > kMaxId + 1) {
      return absl::InvalidArgumentError(cat("vocab_size ", *vocab_size, " is too large"));
    }
    if (past_added > *vocab_size) {
      const auto& [id, token] = *spec->added.rbegin();
      return absl::InvalidArgumentError(cat("added token id ", id, " '", excerpt(token.content),
                                            "' is beyond vocab_size ", *vocab_size));
    }
    spec->vocab_size = *vocab_size;
  } else {
    spec->vocab_size =
        std::max(num_ranks + (kimi_layout ? kKimiReservedSpecialIds : 0), past_added);
  }
  return absl::OkStatus();
}

StatusOr<std::optional<int64_t>> vocab_size_from_config_json(std::string_view json_text) {
  K3_ASSIGN_OR_RETURN(json config, parse_json(json_text, "config.json"));
  if (!config.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  const json* where = &config;
  if (config.contains("text_config") && config["text_config"].is_object() &&
      config["text_config"].contains("vocab_size")) {
    where = &config["text_config"];
  }
  auto it = where->find("vocab_size");
  if (it == where->end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
    return absl::InvalidArgumentError("config.json: vocab_size must be a positive integer");
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

StatusOr<TokenizerSpec> load_tokenizer_spec(const std::string& path,
                                            std::optional<int64_t> vocab_size) {
  std::string dir;
  std::string tiktoken_path;
  std::string hf_path;
  if (is_directory(path)) {
    dir = path;
    if (is_file(dir + "/tiktoken.model")) {
      tiktoken_path = dir + "/tiktoken.model";
    } else if (is_file(dir + "/tokenizer.json")) {
      hf_path = dir + "/tokenizer.json";
    } else {
      return absl::NotFoundError(cat("no tiktoken.model or tokenizer.json in ", path));
    }
  } else if (is_file(path)) {
    std::string parent = std::filesystem::path(path).parent_path().string();
    dir = parent.empty() ? std::string(".") : std::move(parent);
    const bool json_file = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    (json_file ? hf_path : tiktoken_path) = path;
  } else {
    return absl::NotFoundError(cat("no tokenizer file or directory at ", path));
  }
  if (!vocab_size.has_value()) {
    K3_ASSIGN_OR_RETURN(vocab_size, vocab_size_in_dir(dir));
  }
  TokenizerSpec spec;
  bool kimi_layout = false;
  if (!hf_path.empty()) {
    K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(hf_path, size_t{256} << 20));
    K3_ASSIGN_OR_RETURN(spec, parse_hf_tokenizer_json(text, hf_path));
  } else {
    K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(tiktoken_path, size_t{256} << 20));
    K3_ASSIGN_OR_RETURN(spec.ranks, parse_tiktoken_model(text, tiktoken_path));
    const std::string config_path = dir + "/tokenizer_config.json";
    if (is_file(config_path)) {
      kimi_layout = true;
      K3_ASSIGN_OR_RETURN(std::string config, base::read_small_file(config_path));
      K3_RETURN_IF_ERROR(parse_tokenizer_config(config, &spec, config_path));
    }
  }
  K3_RETURN_IF_ERROR(settle_vocab_size(vocab_size, kimi_layout, &spec));
  return spec;
}

}  // namespace k3::tokenizer
