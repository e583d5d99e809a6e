// Reading a checkpoint's tokenizer files into a TokenizerSpec: tiktoken.model
// (`base64(token bytes) rank` per line) with tokenizer_config.json
// (`added_tokens_decoder`) and config.json (`vocab_size`), or a Hugging Face
// tokenizer.json (byte-level `model.vocab` + `added_tokens`, read as rank-BPE:
// the id is the rank, the merges list is not used). All of it is untrusted
// input: every problem is an InvalidArgument naming the file and line or id.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"
#include "shared/tokenizer/vocab.h"

namespace k3::tokenizer {

// Kimi's tokenizer reserves this many ids after the ranks for special tokens.
inline constexpr int64_t kKimiReservedSpecialIds = 256;

// An added token of tokenizer_config.json / tokenizer.json.
struct AddedToken {
  std::string content;
  bool special = true;  // the config's flag (informational: every added token
                        // is matched as a special token in markup)
};

struct TokenizerSpec {
  std::vector<std::string> ranks;        // token bytes by rank, 0 .. n-1
  std::map<TokenId, AddedToken> added;   // ids >= ranks.size()
  int64_t vocab_size = 0;                // ranks + every special id, reserved included
  std::optional<std::string> bos_token;  // contents the config names, if any
  std::optional<std::string> eos_token;
};

// Parses tiktoken.model text. `name` labels error messages. Refuses a line
// that is not `BASE64 RANK`, bad base64, a duplicate rank (naming both lines),
// and ranks that are not exactly 0 .. n-1.
StatusOr<std::vector<std::string>> parse_tiktoken_model(std::string_view text,
                                                        std::string_view name = "tiktoken.model");

// Adds tokenizer_config.json's added_tokens_decoder, bos_token and eos_token
// to *spec (whose ranks are set). Refuses ids that are not integers, that
// collide with a rank, or that repeat a content.
Status parse_tokenizer_config(std::string_view json_text, TokenizerSpec* spec,
                              std::string_view name = "tokenizer_config.json");

// Parses a Hugging Face tokenizer.json with a byte-level BPE model.
StatusOr<TokenizerSpec> parse_hf_tokenizer_json(std::string_view json_text,
                                                std::string_view name = "tokenizer.json");

// Sets spec->vocab_size: `vocab_size` when given (refused if it leaves out a
// rank or an added id), else ranks + kKimiReservedSpecialIds when `kimi_layout`
// (the checkpoint has a tokenizer_config.json), else ranks; at least one past
// the highest added id either way.
Status settle_vocab_size(std::optional<int64_t> vocab_size, bool kimi_layout, TokenizerSpec* spec);

// The checkpoint's `vocab_size` from config.json text (text_config first, then
// the root), or nullopt when it has none.
StatusOr<std::optional<int64_t>> vocab_size_from_config_json(std::string_view json_text);

// Loads the tokenizer files at `path`: a model directory (tiktoken.model +
// tokenizer_config.json + config.json, or tokenizer.json), a tiktoken.model
// file (tokenizer_config.json and config.json beside it are read when present),
// or a tokenizer.json file. `vocab_size` overrides config.json.
StatusOr<TokenizerSpec> load_tokenizer_spec(const std::string& path,
                                            std::optional<int64_t> vocab_size = std::nullopt);

// Standard base64 (RFC 4648, padded) to bytes; nullopt when malformed.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace k3::tokenizer
