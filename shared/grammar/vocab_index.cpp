#include "shared/grammar/vocab_index.h"

#include <algorithm>
#include <numeric>

#include "shared/chat/segment.h"

namespace k3::grammar {
namespace {

// A byte trie of the given ids (sorted by bytes, a subtree's tokens are a
// contiguous range; children are laid out contiguously, breadth-first).
VocabTrie build_trie(const std::vector<std::string>& token_bytes, std::vector<int32_t> order) {
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const std::string& x = token_bytes[static_cast<size_t>(a)];
    const std::string& y = token_bytes[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  VocabTrie t;
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  t.nodes.emplace_back();
  std::vector<Pending> queue = {{0, 0, order.size(), 0}};
  const auto byte_at = [&](size_t k, size_t depth) {
    return static_cast<unsigned char>(token_bytes[static_cast<size_t>(order[k])][depth]);
  };
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.begin;
    // Tokens that end at this depth come first in the sorted range.
    t.nodes[p.node].tokens_begin = static_cast<uint32_t>(t.tokens.size());
    while (i < p.end && token_bytes[static_cast<size_t>(order[i])].size() == p.depth)
      t.tokens.push_back(order[i++]);
    t.nodes[p.node].tokens_end = static_cast<uint32_t>(t.tokens.size());
    t.nodes[p.node].first_child = static_cast<uint32_t>(t.nodes.size());
    while (i < p.end) {
      const unsigned char byte = byte_at(i, p.depth);
      size_t j = i;
      while (j < p.end && byte_at(j, p.depth) == byte) ++j;
      VocabTrie::TrieNode child;
      child.byte = byte;
      t.nodes.push_back(child);
      queue.push_back({static_cast<uint32_t>(t.nodes.size() - 1), i, j, p.depth + 1});
      ++t.nodes[p.node].num_children;
      i = j;
    }
  }
  return t;
}

// The code points of bytes made of whole, well-formed UTF-8 characters; -1
// otherwise. `json`: also -1 when a byte needs escaping in a JSON string.
int64_t inner_code_points(const std::string& s, bool json) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (json && (b < 0x20 || b == '"' || b == '\\')) return -1;
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      len = 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return -1;
    }
    if (i + len > s.size()) return -1;
    for (size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return -1;
    }
    i += len;
    ++n;
  }
  return n;
}

TokenClass build_class(const std::vector<std::string>& token_bytes, bool json) {
  TokenClass c;
  std::vector<std::pair<int64_t, int32_t>> inner;
  std::vector<int32_t> others;
  for (size_t i = 0; i < token_bytes.size(); ++i) {
    if (token_bytes[i].empty()) continue;
    const int64_t n = inner_code_points(token_bytes[i], json);
    if (n > 0) {
      inner.emplace_back(n, static_cast<int32_t>(i));
    } else {
      others.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(inner.begin(), inner.end());
  for (const auto& [n, id] : inner) {
    c.ids.push_back(id);
    c.code_points.push_back(static_cast<uint32_t>(n));
  }
  c.trie = build_trie(token_bytes, c.ids);
  c.others = build_trie(token_bytes, std::move(others));
  const size_t words = (token_bytes.size() + 63) / 64;
  c.upto_bits.assign(static_cast<size_t>(c.max_code_points()) + 1, std::vector<uint64_t>(words, 0));
  size_t i = 0;
  for (size_t n = 1; n < c.upto_bits.size(); ++n) {
    c.upto_bits[n] = c.upto_bits[n - 1];
    for (; i < c.ids.size() && c.code_points[i] == n; ++i) {
      const auto id = static_cast<size_t>(c.ids[i]);
      c.upto_bits[n][id / 64] |= uint64_t{1} << (id % 64);
    }
  }
  return c;
}

}  // namespace

VocabIndex VocabIndex::build(const std::vector<std::string>& token_bytes,
                             std::array<int32_t, 4> control) {
  VocabIndex v;
  v.bytes_ = token_bytes;
  v.control_ = control;
  std::vector<int32_t> all;
  for (size_t i = 0; i < token_bytes.size(); ++i)
    if (!token_bytes[i].empty()) {
      all.push_back(static_cast<int32_t>(i));
      v.max_len_ = std::max(v.max_len_, token_bytes[i].size());
    }
  v.all_ = build_trie(token_bytes, std::move(all));
  v.text_inner_ = build_class(token_bytes, /*json=*/false);
  v.string_inner_ = build_class(token_bytes, /*json=*/true);
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

int64_t TokenClass::count_between(uint32_t lo, uint32_t hi) const {
  if (hi < lo) return 0;
  const auto a = std::lower_bound(code_points.begin(), code_points.end(), lo);
  const auto b = std::upper_bound(code_points.begin(), code_points.end(), hi);
  return b - a;
}

int VocabIndex::control_symbol(int32_t id) const {
  for (int k = 0; k < 4; ++k)
    if (control_[static_cast<size_t>(k)] == id && id >= 0) return 256 + k;
  return -1;
}

}  // namespace k3::grammar
