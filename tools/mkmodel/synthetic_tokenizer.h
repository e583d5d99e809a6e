// The tokenizer files mkmodel writes beside the weights: tiktoken.model (a
// byte-level BPE trained on an embedded multilingual text), tokenizer_config.json
// (the special tokens) and the special-token ids the config refers to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/base/status.h"

namespace k3::tools {

// Kimi reserves 256 ids after the BPE ranks for special tokens.
inline constexpr int64_t kReservedSpecialIds = 256;

struct SyntheticTokenizer {
  int64_t num_ranks = 0;
  int64_t vocab_size = 0;  // num_ranks + kReservedSpecialIds
  int64_t bos_id = 0, eos_id = 0, end_of_msg_id = 0, open_id = 0, close_id = 0, sep_id = 0;
  std::string tiktoken_model;         // file content
  std::string tokenizer_config_json;  // file content
};

// Trains up to `target_ranks` ranks (fewer if the corpus runs out of pairs).
StatusOr<SyntheticTokenizer> make_synthetic_tokenizer(int64_t target_ranks);

}  // namespace k3::tools
