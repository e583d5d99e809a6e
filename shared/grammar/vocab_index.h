// The vocabulary as the grammar sees it: every ordinary token's bytes in a
// byte trie (children contiguous, walked depth-first by the mask computation)
// and the ids of the four XTML control tokens. Other special tokens are never
// allowed under a constraint.
//
// Immutable after build; thread-safe to share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "shared/base/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::grammar {

class VocabIndex {
 public:
  struct TrieNode {
    uint32_t first_child = 0;  // index of the first child
    uint32_t num_children = 0;
    uint32_t tokens_begin = 0, tokens_end = 0;  // into tokens(): ids whose bytes end here
    uint8_t byte = 0;
  };

  // token_bytes[id]: the bytes of ordinary token id (empty: not ordinary);
  // control[k]: the id of <|open|>, <|close|>, <|sep|>, <|end_of_msg|> (-1: none).
  static VocabIndex build(const std::vector<std::string>& token_bytes,
                          std::array<int32_t, 4> control);
  // From a model's tokenizer: its ranks, and the control tokens it names.
  static StatusOr<VocabIndex> from_tokenizer(const tokenizer::Tokenizer& tokenizer);

  const std::vector<TrieNode>& nodes() const { return nodes_; }  // nodes()[0]: the root
  const std::vector<int32_t>& tokens() const { return tokens_; }
  size_t max_token_len() const { return max_len_; }
  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // The control symbol (256..259) of id, or -1; and the id of symbol k.
  int control_symbol(int32_t id) const;
  int32_t control_id(int k) const { return control_[static_cast<size_t>(k)]; }

 private:
  std::vector<std::string> bytes_;
  std::array<int32_t, 4> control_ = {-1, -1, -1, -1};
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> tokens_;
  size_t max_len_ = 0;
};

}  // namespace k3::grammar
