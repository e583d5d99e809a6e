// The tokens that end a generation. The published Kimi-K3 snapshot names two:
// config.json's eos_token_id is <|end_of_msg|> (where the model's turn ends)
// and tokenizer_config.json's eos_token is [EOS]; the reference stops on both
// (vLLM stops on the union of generation_config.json's eos ids and the
// tokenizer's eos_token). Our rule, computed once per process (engined's
// serve and generate, the gateway) from the checkpoint's files:
//
//   stops = config.json's eos_token_id (at the root and in text_config; an id
//           or a list of ids)
//         + generation_config.json's eos_token_id (an id or a list)
//         + the tokenizer's eos_token (tokenizer_config.json)
//         + <|end_of_msg|>, when the tokenizer has it
//
// All three files are untrusted: a value that is not an id or a list of ids,
// or an id outside the vocabulary, is an INVALID_ARGUMENT naming the file and
// the key; so is an eos_token that is not a token of the vocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::checkpoint {

// A model's stop tokens. Immutable once made; thread-safe to read.
struct StopTokens {
  std::vector<int32_t> ids;  // sorted, without repeats

  bool contains(int32_t id) const;
  // "163585, 163586" for logs.
  std::string summary() const;
};

// The texts of the files the rule reads (nullopt: the file does not exist)
// and the names error messages give them (their paths, when loaded).
struct StopTokenFiles {
  std::optional<std::string> config_json;
  std::optional<std::string> generation_config_json;
  std::optional<std::string> tokenizer_config_json;
  std::string config_name = "config.json";
  std::string generation_config_name = "generation_config.json";
  std::string tokenizer_config_name = "tokenizer_config.json";
};

// The union over `files` and `tokenizer` (null: a checkpoint without
// tokenizer files; the config files alone then). Ids are checked against
// config.json's vocab_size (text_config first, then the root), else the
// tokenizer's vocabulary.
StatusOr<StopTokens> stop_tokens(const StopTokenFiles& files,
                                 const tokenizer::Tokenizer* tokenizer);

// Reads config.json, generation_config.json and tokenizer_config.json from
// `model_dir` (each may be missing) and applies stop_tokens().
StatusOr<StopTokens> load_stop_tokens(const std::string& model_dir,
                                      const tokenizer::Tokenizer* tokenizer);

}  // namespace k3::checkpoint
