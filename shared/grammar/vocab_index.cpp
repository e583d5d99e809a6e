#include "shared/grammar/vocab_index.h"

#include <algorithm>
#include <map>
#include <memory>

#include "shared/chat/segment.h"

namespace k3::grammar {

VocabIndex VocabIndex::build(const std::vector<std::string>& token_bytes,
                             std::array<int32_t, 4> control) {
  VocabIndex v;
  v.bytes_ = token_bytes;
  v.control_ = control;
  // Sorted by bytes, the tokens of a subtree are contiguous: a node is a
  // range of the sorted order and a depth.
  std::vector<int32_t> order;
  for (size_t i = 0; i < token_bytes.size(); ++i)
    if (!token_bytes[i].empty()) {
      order.push_back(static_cast<int32_t>(i));
      v.max_len_ = std::max(v.max_len_, token_bytes[i].size());
    }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] != token_bytes[static_cast<size_t>(b)]
               ? token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)]
               : a < b;
  });
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  v.nodes_.emplace_back();
  std::vector<Pending> queue = {{0, 0, order.size(), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.begin;
    // Tokens that end at this depth come first in the sorted range.
    const auto len = [&](size_t k) { return token_bytes[static_cast<size_t>(order[k])].size(); };
    v.nodes_[p.node].tokens_begin = static_cast<uint32_t>(v.tokens_.size());
    while (i < p.end && len(i) == p.depth) v.tokens_.push_back(order[i++]);
    v.nodes_[p.node].tokens_end = static_cast<uint32_t>(v.tokens_.size());
    v.nodes_[p.node].first_child = static_cast<uint32_t>(v.nodes_.size());
    while (i < p.end) {
      const auto byte =
          static_cast<unsigned char>(token_bytes[static_cast<size_t>(order[i])][p.depth]);
      size_t j = i;
      while (j < p.end && static_cast<unsigned char>(
                              token_bytes[static_cast<size_t>(order[j])][p.depth]) == byte)
        ++j;
      TrieNode child;
      child.byte = byte;
      v.nodes_.push_back(child);
      queue.push_back({static_cast<uint32_t>(v.nodes_.size() - 1), i, j, p.depth + 1});
      ++v.nodes_[p.node].num_children;
      i = j;
    }
  }
  return v;
}

StatusOr<VocabIndex> VocabIndex::from_tokenizer(const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (tokenizer::TokenId id = 0; id < tokenizer.num_ranks(); ++id)
    bytes[static_cast<size_t>(id)] = std::string(tokenizer.token_bytes(id));
  std::array<int32_t, 4> control = {-1, -1, -1, -1};
  const std::string_view names[4] = {chat::kOpenToken, chat::kCloseToken, chat::kSepToken,
                                     chat::kEndOfMsgToken};
  for (int k = 0; k < 4; ++k)
    if (auto id = tokenizer.special_id(names[k])) control[static_cast<size_t>(k)] = *id;
  return build(bytes, control);
}

int VocabIndex::control_symbol(int32_t id) const {
  for (int k = 0; k < 4; ++k)
    if (control_[static_cast<size_t>(k)] == id && id >= 0) return 256 + k;
  return -1;
}

}  // namespace k3::grammar
