// Matcher::distance: the fewest symbols that complete each frame, summed
// over a stack (the closing-in-time rule of token_constraint.h uses it).
#include <algorithm>

#include "shared/grammar/json_lexer.h"
#include "shared/grammar/matcher.h"

namespace k3::grammar {
namespace {

int64_t name_len(const Node& n, size_t p) {
  return n.key_len[p];
}

// The required properties not yet seen, each as `"name":value`, with commas:
// one before each when `comma_first`, else between them.
int64_t required_cost(const Node& n, uint64_t seen, bool comma_first) {
  int64_t cost = 0, count = 0;
  for (uint64_t todo = n.required & ~seen; todo != 0; todo &= todo - 1) {
    cost = sat_add(cost, n.pair_len[static_cast<size_t>(__builtin_ctzll(todo))]);
    ++count;
  }
  return count == 0 ? 0 : sat_add(cost, comma_first ? count : count - 1);
}

// The cheapest key-value pair still allowed.
int64_t cheapest_pair(const Grammar& g, const Node& n, uint64_t seen) {
  int64_t best = kInfinite;
  for (size_t p = 0; p < n.properties.size(); ++p)
    if (!(seen >> p & 1)) best = std::min(best, n.pair_len[p]);
  if (n.additional >= 0)
    best = std::min(best, sat_add(3, g.nodes[static_cast<size_t>(n.additional)].min_len));
  return best;
}

int64_t value_len(const Grammar& g, const Node& n, int64_t prop) {
  const int32_t node = prop >= 0 ? n.properties[static_cast<size_t>(prop)].node : n.additional;
  return node >= 0 ? g.nodes[static_cast<size_t>(node)].min_len : kInfinite;
}

}  // namespace

int64_t Matcher::frame_rest(const Frame& f) const {
  const Grammar& g = *g_;
  const Node& n = g.nodes[static_cast<size_t>(f.node)];
  switch (n.kind) {
    case NodeKind::kObject:
      switch (f.phase) {
        case 0:
          return n.min_len;
        case 1:  // after '{'
          return required_cost(n, f.bits, false) + 1;
        case 2: {  // inside a key: finish it as a declared name or (if allowed) another
          int64_t best = kInfinite;
          if (f.pos >= 0) {
            const uint64_t below = n.key_props[static_cast<size_t>(f.pos)] & ~f.bits;
            for (size_t p = 0; p < n.properties.size(); ++p) {
              if (!(below >> p & 1)) continue;
              const int64_t key = name_len(n, p) - n.key_depth[static_cast<size_t>(f.pos)] + 1;
              best =
                  std::min(best, sat_add(sat_add(key + 1, value_len(g, n, static_cast<int64_t>(p))),
                                         required_cost(n, f.bits | uint64_t{1} << p, true) + 1));
            }
          }
          if (n.additional >= 0)
            best = std::min(best, sat_add(sat_add(lex_pending(f) + 2, value_len(g, n, -1)),
                                          required_cost(n, f.bits, true) + 1));
          return best;
        }
        case 3:  // after the key
          return sat_add(sat_add(1, value_len(g, n, f.count)), required_cost(n, f.bits, true) + 1);
        case 4:
          return sat_add(value_len(g, n, f.count), required_cost(n, f.bits, true) + 1);
        case 5:  // after a value
          return sat_add(required_cost(n, f.bits, true), 1);
        default: {  // after ','
          const int64_t req = required_cost(n, f.bits, false);
          return sat_add(req > 0 ? req : cheapest_pair(g, n, f.bits), 1);
        }
      }
    case NodeKind::kArray: {
      const int64_t item = g.nodes[static_cast<size_t>(n.item)].min_len;
      switch (f.phase) {
        case 0:
          return n.min_len;
        case 1:
          return n.min_len - 1;
        case 2:
          return sat_add(sat_mul(std::max<int64_t>(0, n.min_count - f.count), sat_add(item, 1)), 1);
        default:
          return sat_add(
              sat_add(item, sat_mul(std::max<int64_t>(0, n.min_count - f.count - 1), item + 1)), 1);
      }
    }
    case NodeKind::kString: {
      if (f.phase == 0) return n.min_len;
      const int64_t pending = lex_pending(f);
      int64_t chars = std::max<int64_t>(0, n.min_count - f.count - (pending > 0 ? 1 : 0));
      if (n.regex >= 0) {
        const int64_t d = g.regexes[static_cast<size_t>(n.regex)].distance(f.bits);
        chars = std::max(chars, d);
      }
      return sat_add(sat_add(pending, chars), n.raw ? 0 : 1);
    }
    case NodeKind::kNumber: {
      if (f.phase == 0) return n.min_len;
      if (n.range >= 0) return g.number_ranges[static_cast<size_t>(n.range)].rest(number_cursor(f));
      if (n.integer && (f.phase == 1 || f.phase == 2 || f.phase == 3)) {
        const bool neg = (f.bits >> 63) != 0;
        const int64_t d = f.phase == 1 ? 0 : static_cast<int64_t>(f.bits & 0xFFFF);
        const int64_t k = integer_extra_digits(n, neg, f.phase == 1 ? 0 : f.count, d);
        return k < 0 ? kInfinite : k;
      }
      // after '-', '.', 'e' or the exponent's sign: a digit
      return f.phase == 1 || f.phase == 4 || f.phase == 6 || f.phase == 7 ? 1 : 0;
    }
    case NodeKind::kLiteral:
      return n.literal.rest[static_cast<size_t>(f.pos)];
    case NodeKind::kChoice:
      return f.phase == 0 ? n.min_len : 0;
    case NodeKind::kSeq: {
      int64_t d = 0;
      for (size_t i = static_cast<size_t>(f.pos); i < n.children.size(); ++i)
        d = sat_add(d, g.nodes[static_cast<size_t>(n.children[i])].min_len);
      return d;
    }
    case NodeKind::kRepeat:
      return sat_mul(std::max<int64_t>(0, n.min_count - f.count),
                     g.nodes[static_cast<size_t>(n.item)].min_len);
    case NodeKind::kFreeText:
      return f.need;
  }
  return 0;
}

}  // namespace k3::grammar
