// The tokenizer files mkmodel writes beside the weights: tiktoken.model (a
// byte-level BPE trained on an embedded multilingual text), tokenizer_config.json
// (the special tokens) and the special-token ids the config refers to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::tools {

// Kimi reserves 256 ids after the BPE ranks for special tokens.
inline constexpr int64_t kReservedSpecialIds = 256;

// The named added tokens of the published tokenizer_config.json, by offset
// from the end of the ranks (163,584 ranks there: [BOS] is 163584), and
// their `special` flag; the other reserved ids are unnamed.
struct NamedSpecial {
  int64_t offset;
  const char* content;
  bool special;
};
inline constexpr NamedSpecial kNamedSpecials[] = {
    {0, "[BOS]", true},
    {1, "[EOS]", true},
    {2, "<|end_of_msg|>", true},
    {3, "<|open|>", false},
    {4, "<|close|>", false},
    {5, "<|sep|>", false},
    {6, "[start_header_id]", true},
    {7, "[end_header_id]", true},
    {9, "[EOT]", true},
    {18, "<|media_begin|>", true},
    {19, "<|media_content|>", true},
    {20, "<|media_end|>", true},
    {21, "<|media_pad|>", true},
    {65, "<osagent_mode>", true},
    {254, "[UNK]", true},
    {255, "[PAD]", true},
};
struct SyntheticTokenizer {
  int64_t num_ranks = 0;
  int64_t vocab_size = 0;  // num_ranks + kReservedSpecialIds
  int64_t bos_id = 0, eos_id = 0, end_of_msg_id = 0, open_id = 0, close_id = 0, sep_id = 0;
  int64_t media_pad_id = 0;           // <|media_pad|>: config.json's media_placeholder_token_id
  int64_t pad_id = 0;                 // [PAD], the last reserved id
  std::string tiktoken_model;         // file content
  std::string tokenizer_config_json;  // file content
};

// Trains up to `target_ranks` ranks (fewer if the corpus runs out of pairs).
StatusOr<SyntheticTokenizer> make_synthetic_tokenizer(int64_t target_ranks);

}  // namespace k3::tools
