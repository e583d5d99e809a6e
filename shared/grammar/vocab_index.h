// The vocabulary as the grammar sees it: every ordinary token's bytes in a
// byte trie (children contiguous, walked depth-first by the mask computation)
// and the ids of the four XTML control tokens. Other special tokens are never
// allowed under a constraint.
//
// Two token classes make string contents cheap (most of the vocabulary): a
// token is *text-inner* when its bytes are whole UTF-8 characters, and
// *string-inner* when moreover it has no '"', '\' or control character. Such
// a token keeps a string (or free text) going and only adds code points; the
// mask takes those classes whole and walks only the trie of the other tokens.
//
// Immutable after build; thread-safe to share.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"

namespace k3::grammar {

struct VocabTrie {
  struct TrieNode {
    uint32_t first_child = 0;  // index of the first child
    uint32_t num_children = 0;
    uint32_t tokens_begin = 0, tokens_end = 0;  // into tokens: ids whose bytes end here
    uint8_t byte = 0;
  };
  std::vector<TrieNode> nodes;  // nodes[0]: the root
  std::vector<int32_t> tokens;
};

// Tokens of a class, ordered by how many code points they hold.
struct TokenClass {
  std::vector<int32_t> ids;
  std::vector<uint32_t> code_points;  // per id, ascending
  VocabTrie trie;                     // the class's tokens
  VocabTrie others;                   // the tokens outside the class
  // upto_bits[n]: the class's ids with at most n code points as a bitmask
  // over the vocabulary, n = 0..max_code_points().
  std::vector<std::vector<uint64_t>> upto_bits;

  int64_t max_code_points() const { return code_points.empty() ? 0 : code_points.back(); }
  // The bitmask of ids with at most n code points (n clamped to the range).
  const uint64_t* upto(int64_t n) const {
    return upto_bits[static_cast<size_t>(std::clamp<int64_t>(n, 0, max_code_points()))].data();
  }
  // How many ids hold between lo and hi code points.
  int64_t count_between(uint32_t lo, uint32_t hi) const;
};

class VocabIndex {
 public:
  // token_bytes[id]: the bytes of ordinary token id (empty: not ordinary);
  // control[k]: the id of <|open|>, <|close|>, <|sep|>, <|end_of_msg|> (-1: none).
  static VocabIndex build(const std::vector<std::string>& token_bytes,
                          std::array<int32_t, 4> control);
  // From a model's tokenizer: its ranks, and the control tokens it names.
  static StatusOr<VocabIndex> from_tokenizer(const tokenizer::Tokenizer& tokenizer);

  const VocabTrie& trie() const { return all_; }
  const TokenClass& text_inner() const { return text_inner_; }
  const TokenClass& string_inner() const { return string_inner_; }
  size_t max_token_len() const { return max_len_; }
  int64_t vocab_size() const { return static_cast<int64_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // The control symbol (256..259) of id, or -1; and the id of symbol k.
  int control_symbol(int32_t id) const;
  int32_t control_id(int k) const { return control_[static_cast<size_t>(k)]; }

 private:
  std::vector<std::string> bytes_;
  std::array<int32_t, 4> control_ = {-1, -1, -1, -1};
  VocabTrie all_;
  TokenClass text_inner_, string_inner_;
  size_t max_len_ = 0;
};

}  // namespace k3::grammar
