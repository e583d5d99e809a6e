#include "shared/grammar/grammar.h"

#include <algorithm>

namespace k3::grammar {

void LiteralTrie::add(const std::vector<int>& symbols) {
  int32_t at = 0;
  for (int s : symbols) {
    int32_t next = child(at, s);
    if (next < 0) {
      next = static_cast<int32_t>(nodes.size());
      nodes.emplace_back();
      auto& edges = nodes[static_cast<size_t>(at)].edges;
      edges.insert(std::upper_bound(edges.begin(), edges.end(), std::make_pair(s, -1)), {s, next});
    }
    at = next;
  }
  nodes[static_cast<size_t>(at)].terminal = true;
}

int32_t LiteralTrie::child(int32_t node, int symbol) const {
  if (node < 0) return -1;
  for (const auto& [s, n] : nodes[static_cast<size_t>(node)].edges) {
    if (s == symbol) return n;
    if (s > symbol) break;
  }
  return -1;
}

void LiteralTrie::finish() {
  // Children have larger indices than their parents: one pass backwards.
  rest.assign(nodes.size(), kInfinite);
  for (size_t i = nodes.size(); i-- > 0;) {
    if (nodes[i].terminal) rest[i] = 0;
    for (const auto& [s, n] : nodes[i].edges)
      rest[i] = std::min(rest[i], sat_add(rest[static_cast<size_t>(n)], 1));
  }
}

int32_t Grammar::add(Node node) {
  nodes.push_back(std::move(node));
  return static_cast<int32_t>(nodes.size() - 1);
}

namespace {

int64_t decimal_digits(__int128 v) {
  int64_t d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

// Fewest symbols of an integer in [min, max].
int64_t shortest_integer(const Node& n) {
  const __int128 lo = n.has_min ? n.min_value : -(static_cast<__int128>(1) << 80);
  const __int128 hi = n.has_max ? n.max_value : (static_cast<__int128>(1) << 80);
  if (lo > hi) return kInfinite;
  if (lo <= 0 && hi >= 0) return 1;
  if (lo > 0) return decimal_digits(lo);
  return 1 + decimal_digits(-hi);
}

int64_t key_cost(const Node& n, size_t p, int64_t value_len) {
  // "name": value, with a comma counted by the caller
  return sat_add(n.key_len[p] + 3, value_len);
}

}  // namespace

void Grammar::finish() {
  for (Node& n : nodes) {
    n.key_len.clear();
    for (const Property& p : n.properties)
      n.key_len.push_back(static_cast<int64_t>(canonical_json_string_body(p.name).size()));
    n.literal.finish();
    n.keys.finish();
    n.min_len = kInfinite;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (Node& n : nodes) {
      int64_t m = kInfinite;
      auto len = [&](int32_t id) { return nodes[static_cast<size_t>(id)].min_len; };
      switch (n.kind) {
        case NodeKind::kObject: {
          m = 2;
          int64_t k = 0;
          for (size_t p = 0; p < n.properties.size(); ++p)
            if (n.required >> p & 1) {
              m = sat_add(m, key_cost(n, p, len(n.properties[p].node)) + (k++ > 0 ? 1 : 0));
            }
          break;
        }
        case NodeKind::kArray:
          m = n.min_count == 0 ? 2 : sat_add(n.min_count + 1, sat_mul(n.min_count, len(n.item)));
          break;
        case NodeKind::kString: {
          int64_t chars = n.min_count;
          if (n.regex >= 0)
            chars = std::max(chars, regexes[static_cast<size_t>(n.regex)].distance(Regex::kStart));
          m = sat_add(chars, n.raw ? 0 : 2);
          break;
        }
        case NodeKind::kNumber:
          m = n.range >= 0 ? number_ranges[static_cast<size_t>(n.range)].rest(NumberCursor{})
              : n.integer  ? shortest_integer(n)
                           : 1;
          break;
        case NodeKind::kLiteral:
          m = n.literal.rest[0];
          break;
        case NodeKind::kChoice:
          for (int32_t c : n.children) m = std::min(m, len(c));
          break;
        case NodeKind::kSeq:
          m = 0;
          for (int32_t c : n.children) m = sat_add(m, len(c));
          break;
        case NodeKind::kRepeat:
          m = sat_mul(n.min_count, len(n.item));
          break;
        case NodeKind::kFreeText:
          m = 0;
          break;
      }
      if (m < n.min_len) {
        n.min_len = m;
        changed = true;
      }
    }
  }
  for (Node& n : nodes) {
    n.pair_len.clear();
    for (size_t p = 0; p < n.properties.size(); ++p)
      n.pair_len.push_back(
          key_cost(n, p, nodes[static_cast<size_t>(n.properties[p].node)].min_len));
  }
}

std::vector<int> symbols_of(std::string_view bytes) {
  std::vector<int> out;
  out.reserve(bytes.size());
  for (char c : bytes) out.push_back(static_cast<unsigned char>(c));
  return out;
}

std::string canonical_json_string_body(std::string_view decoded) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : decoded) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out;
}

int64_t integer_extra_digits(const Node& n, bool neg, __int128 v, int64_t d) {
  // Unbounded: any digits do (the value is not kept, see canonicalize()).
  if (!n.has_min && !n.has_max) return d == 0 ? 1 : 0;
  __int128 lo = 0, hi = static_cast<__int128>(1) << 100;  // |x| range
  if (neg) {
    lo = 1;
    if (n.has_max) lo = std::max<__int128>(lo, -static_cast<__int128>(n.max_value));
    if (n.has_min) hi = -static_cast<__int128>(n.min_value);
  } else {
    if (n.has_min) lo = std::max<__int128>(lo, n.min_value);
    if (n.has_max) hi = n.max_value;
  }
  if (lo > hi) return -1;
  if (d == 0) {  // any |x| >= (neg ? 1 : 0) with up to kMaxIntDigits digits
    __int128 p = 1;
    for (int64_t k = 1; k <= kMaxIntDigits; ++k) {
      p *= 10;
      __int128 first = k == 1 ? 0 : p / 10;
      if (std::max(first, lo) <= std::min(p - 1, hi)) return k;
    }
    return -1;
  }
  if (v == 0) return lo == 0 ? 0 : -1;  // a leading 0 is the whole number
  __int128 p = 1;
  for (int64_t k = 0; d + k <= kMaxIntDigits; ++k) {
    const __int128 a = v * p, b = v * p + p - 1;
    if (std::max(a, lo) <= std::min(b, hi)) return k;
    p *= 10;
  }
  return -1;
}

}  // namespace k3::grammar
