#include "shared/grammar/regex.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <memory>

namespace k3::grammar {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxPositions = 63;
constexpr int64_t kDead = int64_t{1} << 40;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges n = normalize(r), out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : n) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges digit_class() {
  return {{'0', '9'}};
}
Ranges word_class() {
  return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
}
Ranges space_class() {
  return {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
Ranges dot_class() {
  return complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
}

// The regex's syntax tree.
struct Ast {
  enum class Kind { kEmpty, kClass, kConcat, kAlt, kRepeat } kind = Kind::kEmpty;
  Ranges ranges;                            // kClass
  std::vector<std::unique_ptr<Ast>> parts;  // kConcat, kAlt; kRepeat: one
  int64_t min = 0, max = -1;                // kRepeat; max -1: unbounded
};

std::vector<uint32_t> decode_utf8(std::string_view s, bool* ok) {
  std::vector<uint32_t> out;
  *ok = true;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) {
      *ok = false;
      return out;
    }
    uint32_t c = n == 0 ? b : b & (0x3Fu >> n);
    for (int k = 1; k <= n; ++k) {
      const auto t = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((t & 0xC0) != 0x80) {
        *ok = false;
        return out;
      }
      c = (c << 6) | (t & 0x3F);
    }
    out.push_back(c);
    i += static_cast<size_t>(n) + 1;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<uint32_t> cps) : s_(std::move(cps)) {}

  StatusOr<std::unique_ptr<Ast>> parse_alt() {
    auto alt = std::make_unique<Ast>();
    alt->kind = Ast::Kind::kAlt;
    while (true) {
      K3_ASSIGN_OR_RETURN(auto seq, parse_seq());
      alt->parts.push_back(std::move(seq));
      if (at_end() || peek() != '|') break;
      ++i_;
    }
    return alt;
  }
  bool at_end() const { return i_ >= s_.size(); }
  uint32_t peek() const { return s_[i_]; }
  size_t pos() const { return i_; }

 private:
  Status refuse(std::string_view what) const {
    return absl::InvalidArgumentError(
        cat("pattern: ", what, " at offset ", i_, " is outside the supported regex subset"));
  }

  StatusOr<std::unique_ptr<Ast>> parse_seq() {
    auto seq = std::make_unique<Ast>();
    seq->kind = Ast::Kind::kConcat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      K3_ASSIGN_OR_RETURN(auto atom, parse_atom());
      K3_ASSIGN_OR_RETURN(atom, parse_quantifiers(std::move(atom)));
      seq->parts.push_back(std::move(atom));
    }
    return seq;
  }

  StatusOr<std::unique_ptr<Ast>> parse_quantifiers(std::unique_ptr<Ast> atom) {
    while (!at_end()) {
      int64_t min = 0, max = -1;
      const uint32_t c = peek();
      if (c == '*') {
        ++i_;
      } else if (c == '+') {
        min = 1;
        ++i_;
      } else if (c == '?') {
        max = 1;
        ++i_;
      } else if (c == '{') {
        ++i_;
        K3_ASSIGN_OR_RETURN(min, number());
        max = min;
        if (!at_end() && peek() == ',') {
          ++i_;
          max = -1;
          if (!at_end() && peek() != '}') {
            K3_ASSIGN_OR_RETURN(max, number());
          }
        }
        if (at_end() || peek() != '}') return refuse("a malformed {n,m}");
        ++i_;
        if (max >= 0 && max < min) return refuse("{n,m} with m < n");
      } else {
        break;
      }
      if (!at_end() && peek() == '?') ++i_;  // lazy: the same language
      auto rep = std::make_unique<Ast>();
      rep->kind = Ast::Kind::kRepeat;
      rep->min = min;
      rep->max = max;
      rep->parts.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  StatusOr<int64_t> number() {
    int64_t v = 0;
    size_t start = i_;
    while (!at_end() && peek() >= '0' && peek() <= '9' && v < 1000) v = v * 10 + (s_[i_++] - '0');
    if (i_ == start) return refuse("a repeat count that is not a number");
    if (v >= 1000) return refuse("a repeat count over 999");
    return v;
  }

  StatusOr<std::unique_ptr<Ast>> leaf(Ranges r) {
    auto a = std::make_unique<Ast>();
    a->kind = Ast::Kind::kClass;
    a->ranges = normalize(std::move(r));
    return a;
  }

  // An escape after the backslash (i_ at the escaped character): its class.
  StatusOr<Ranges> escape() {
    if (at_end()) return refuse("a trailing backslash");
    const uint32_t c = s_[i_++];
    switch (c) {
      case 'd':
        return digit_class();
      case 'D':
        return complement(digit_class());
      case 'w':
        return word_class();
      case 'W':
        return complement(word_class());
      case 's':
        return space_class();
      case 'S':
        return complement(space_class());
      case 'n':
        return Ranges{{'\n', '\n'}};
      case 't':
        return Ranges{{'\t', '\t'}};
      case 'r':
        return Ranges{{'\r', '\r'}};
      case 'f':
        return Ranges{{'\f', '\f'}};
      case 'v':
        return Ranges{{'\v', '\v'}};
      case 'u': {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
          if (at_end()) return refuse("a short \\u escape");
          const uint32_t h = s_[i_++];
          int d = h >= '0' && h <= '9'   ? static_cast<int>(h - '0')
                  : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
                  : h >= 'A' && h <= 'F' ? static_cast<int>(h - 'A' + 10)
                                         : -1;
          if (d < 0) return refuse("a malformed \\u escape");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        return Ranges{{v, v}};
      }
      default:
        break;
    }
    if (std::string_view(".\\/-^$|()[]{}*+?").find(static_cast<char>(c)) !=
            std::string_view::npos &&
        c < 0x80)
      return Ranges{{c, c}};
    --i_;
    return refuse(cat("the escape \\", std::string(1, static_cast<char>(c < 0x80 ? c : '?'))));
  }

  StatusOr<std::unique_ptr<Ast>> parse_class() {  // i_ after '['
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++i_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (at_end()) return refuse("an unclosed [");
      uint32_t c = s_[i_];
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      ++i_;
      Ranges item;
      bool single = true;
      uint32_t lo = c;
      if (c == '\\') {
        K3_ASSIGN_OR_RETURN(item, escape());
        single = item.size() == 1 && item[0].first == item[0].second;
        lo = item[0].first;
      } else if (c == '[') {
        return refuse("a nested [");
      }
      if (single && i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi = s_[i_++];
        if (hi == '\\') {
          K3_ASSIGN_OR_RETURN(Ranges h, escape());
          if (h.size() != 1 || h[0].first != h[0].second) return refuse("a class as a range end");
          hi = h[0].first;
        }
        if (hi < lo) return refuse("a reversed range");
        r.emplace_back(lo, hi);
      } else if (single) {
        r.emplace_back(lo, lo);
      } else {
        r.insert(r.end(), item.begin(), item.end());
      }
    }
    return leaf(negated ? complement(r) : r);
  }

  StatusOr<std::unique_ptr<Ast>> parse_atom() {
    const uint32_t c = s_[i_++];
    switch (c) {
      case '(': {
        if (!at_end() && peek() == '?') {
          if (i_ + 1 < s_.size() && s_[i_ + 1] == ':') {
            i_ += 2;
          } else {
            --i_;
            return refuse("a (? group other than (?:");
          }
        }
        K3_ASSIGN_OR_RETURN(auto inner, parse_alt());
        if (at_end() || peek() != ')') return refuse("an unclosed (");
        ++i_;
        return inner;
      }
      case '[':
        return parse_class();
      case '.':
        return leaf(dot_class());
      case '\\': {
        if (!at_end() && peek() >= '1' && peek() <= '9') return refuse("a backreference");
        K3_ASSIGN_OR_RETURN(Ranges r, escape());
        return leaf(std::move(r));
      }
      case '^':
        --i_;
        return refuse("^ not at the start");
      case '$':
        --i_;
        return refuse("$ not at the end");
      case '*':
      case '+':
      case '?':
      case '{':
        --i_;
        return refuse("a quantifier with nothing to repeat");
      case ']':
      case '}':
        return leaf({{c, c}});
      default:
        return leaf({{c, c}});
    }
  }

  std::vector<uint32_t> s_;
  size_t i_ = 0;
};

}  // namespace

// Glushkov's construction: a position per class leaf (counted repeats
// expanded), follow sets between them.
class RegexBuilder {
 public:
  struct Info {
    bool nullable = true;
    uint64_t first = 0, last = 0;
  };
  explicit RegexBuilder(Regex* re) : re_(re) {}

  StatusOr<Info> build(const Ast& a) {
    switch (a.kind) {
      case Ast::Kind::kEmpty:
        return Info{};
      case Ast::Kind::kClass: {
        if (re_->positions_.size() >= kMaxPositions)
          return absl::InvalidArgumentError(
              cat("pattern: more than ", kMaxPositions,
                  " positions after expanding repeats (use a simpler pattern or smaller counts)"));
        const uint64_t p = uint64_t{1} << re_->positions_.size();
        re_->positions_.push_back({a.ranges});
        re_->follow_.push_back(0);
        return Info{false, p, p};
      }
      case Ast::Kind::kConcat: {
        Info acc;
        for (const auto& part : a.parts) {
          K3_ASSIGN_OR_RETURN(Info b, build(*part));
          acc = concat(acc, b);
        }
        return acc;
      }
      case Ast::Kind::kAlt: {
        Info acc{false, 0, 0};
        for (const auto& part : a.parts) {
          K3_ASSIGN_OR_RETURN(Info b, build(*part));
          acc.nullable = acc.nullable || b.nullable;
          acc.first |= b.first;
          acc.last |= b.last;
        }
        return acc;
      }
      case Ast::Kind::kRepeat: {
        Info acc;
        for (int64_t k = 0; k < a.min; ++k) {
          K3_ASSIGN_OR_RETURN(Info b, build(*a.parts[0]));
          acc = concat(acc, b);
        }
        if (a.max < 0) {
          K3_ASSIGN_OR_RETURN(Info b, build(*a.parts[0]));
          link(b.last, b.first);
          b.nullable = true;
          acc = concat(acc, b);
        } else {
          for (int64_t k = a.min; k < a.max; ++k) {
            K3_ASSIGN_OR_RETURN(Info b, build(*a.parts[0]));
            b.nullable = true;
            acc = concat(acc, b);
          }
        }
        return acc;
      }
    }
    return Info{};
  }

 private:
  void link(uint64_t from, uint64_t to) {
    for (size_t p = 0; p < re_->positions_.size(); ++p)
      if (from >> p & 1) re_->follow_[p] |= to;
  }
  Info concat(const Info& a, const Info& b) {
    link(a.last, b.first);
    return Info{a.nullable && b.nullable, a.first | (a.nullable ? b.first : 0),
                b.last | (b.nullable ? a.last : 0)};
  }
  Regex* re_;
};

StatusOr<Regex> Regex::compile(std::string_view pattern) {
  bool ok = true;
  std::vector<uint32_t> cps = decode_utf8(pattern, &ok);
  if (!ok) return absl::InvalidArgumentError("pattern: not valid UTF-8");
  bool anchored_start = !cps.empty() && cps.front() == '^';
  if (anchored_start) cps.erase(cps.begin());
  bool anchored_end = false;
  if (!cps.empty() && cps.back() == '$') {
    size_t backslashes = 0;  // `\$` is a literal dollar
    for (size_t k = cps.size() - 1; k > 0 && cps[k - 1] == '\\'; --k) ++backslashes;
    if (backslashes % 2 == 0) {
      anchored_end = true;
      cps.pop_back();
    }
  }
  Parser parser(std::move(cps));
  K3_ASSIGN_OR_RETURN(auto body, parser.parse_alt());
  if (!parser.at_end()) return absl::InvalidArgumentError("pattern: an unmatched )");
  // Unanchored ends match anything: [\s\S]* around the body.
  auto any_star = [] {
    auto cls = std::make_unique<Ast>();
    cls->kind = Ast::Kind::kClass;
    cls->ranges = {{0, kMaxCodePoint}};
    auto rep = std::make_unique<Ast>();
    rep->kind = Ast::Kind::kRepeat;
    rep->parts.push_back(std::move(cls));
    return rep;
  };
  Ast whole;
  whole.kind = Ast::Kind::kConcat;
  if (!anchored_start) whole.parts.push_back(any_star());
  whole.parts.push_back(std::move(body));
  if (!anchored_end) whole.parts.push_back(any_star());

  Regex re;
  RegexBuilder builder(&re);
  K3_ASSIGN_OR_RETURN(RegexBuilder::Info info, builder.build(whole));
  re.first_ = info.first;
  re.last_ = info.last;
  re.nullable_ = info.nullable;
  // Distances to acceptance: backwards breadth-first from the last positions.
  const size_t n = re.positions_.size();
  re.to_end_.assign(n, kDead);
  std::deque<size_t> queue;
  for (size_t p = 0; p < n; ++p)
    if (re.last_ >> p & 1) {
      re.to_end_[p] = 0;
      queue.push_back(p);
    }
  while (!queue.empty()) {
    const size_t q = queue.front();
    queue.pop_front();
    for (size_t p = 0; p < n; ++p)
      if ((re.follow_[p] >> q & 1) && re.to_end_[p] == kDead) {
        re.to_end_[p] = re.to_end_[q] + 1;
        queue.push_back(p);
      }
  }
  for (size_t p = 0; p < n; ++p)
    if (re.to_end_[p] < kDead) re.alive_ |= uint64_t{1} << p;
  if (!re.accepts(kStart) && re.distance(kStart) >= kDead)
    return absl::InvalidArgumentError("pattern: matches no string");
  return re;
}

Regex::State Regex::step(State s, uint32_t c) const {
  uint64_t next = (s & kStart) ? first_ : 0;
  for (uint64_t rest = s & ~kStart; rest != 0; rest &= rest - 1)
    next |= follow_[static_cast<size_t>(std::countr_zero(rest))];
  next &= alive_;
  State out = 0;
  for (uint64_t rest = next; rest != 0; rest &= rest - 1) {
    const auto p = static_cast<size_t>(std::countr_zero(rest));
    for (const auto& [lo, hi] : positions_[p].ranges) {
      if (c < lo) break;
      if (c <= hi) {
        out |= uint64_t{1} << p;
        break;
      }
    }
  }
  return out;
}

bool Regex::accepts(State s) const {
  return ((s & kStart) && nullable_) || (s & last_ & ~kStart) != 0;
}

int64_t Regex::distance(State s) const {
  if (accepts(s)) return 0;
  int64_t best = kDead;
  uint64_t from = s & ~kStart;
  if (s & kStart) {
    for (uint64_t rest = first_; rest != 0; rest &= rest - 1)
      best = std::min(best, to_end_[static_cast<size_t>(std::countr_zero(rest))] + 1);
  }
  for (; from != 0; from &= from - 1) {
    const auto p = static_cast<size_t>(std::countr_zero(from));
    if (to_end_[p] < kDead) best = std::min(best, to_end_[p]);
  }
  return best;
}

}  // namespace k3::grammar
