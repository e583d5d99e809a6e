#include "shared/grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "shared/grammar/json_lexer.h"

namespace k3::grammar {
namespace {

// What a frame does with a symbol.
enum class Step {
  kConsumed,  // taken; the frame goes on
  kDone,      // taken; the frame is complete
  kPass,      // the frame is complete before this symbol: its parent gets it
  kPush,      // the frame moved on and starts a child that gets this symbol
  kReject,
};

// Object phases.
enum : uint8_t {
  kObjStart,
  kObjOpen,     // after '{'
  kObjKey,      // inside a key
  kObjKeyDone,  // after the key's closing quote
  kObjValue,    // after ':'
  kObjAfter,    // after a value
  kObjComma,    // after ','
};
// Array phases.
enum : uint8_t { kArrStart, kArrOpen, kArrAfter, kArrComma };
// Number phases: NumberPhase (number_range.h).

constexpr int kMaxNumberDigits = kMaxMantissaDigits;  // integer and fraction parts (number_range.h)
constexpr int kMaxExpDigits = kMaxExponentDigits;     // keeps every number finite

int64_t digits(uint64_t bits, int field) {
  return static_cast<int64_t>(bits >> (16 * field) & 0xFFFF);
}
uint64_t with_digits(uint64_t bits, int field, int64_t v) {
  return (bits & ~(uint64_t{0xFFFF} << (16 * field))) | (static_cast<uint64_t>(v) << (16 * field));
}
constexpr uint64_t kNegBit = uint64_t{1} << 63;

}  // namespace

namespace {

bool is_digit(int s) {
  return s >= '0' && s <= '9';
}

bool is_number_symbol(int s) {
  return is_digit(s) || s == '-' || s == '+' || s == '.' || s == 'e' || s == 'E';
}

}  // namespace

NumberCursor number_cursor(const Frame& f) {
  NumberCursor c;
  std::memcpy(reinterpret_cast<char*>(&c), &f.count, 8);
  std::memcpy(reinterpret_cast<char*>(&c) + 8, &f.bits, 8);
  return c;
}

void set_number_cursor(Frame* f, const NumberCursor& c) {
  std::memcpy(&f->count, reinterpret_cast<const char*>(&c), 8);
  std::memcpy(&f->bits, reinterpret_cast<const char*>(&c) + 8, 8);
  f->phase = c.phase;
}

std::string State::key() const {
  std::string k;
  key_into(&k);
  return k;
}

void State::key_into(std::string* k) const {
  k->clear();
  for (const Stack& s : stacks) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    k->append(reinterpret_cast<const char*>(&n), sizeof n);
    k->append(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(Frame));
  }
}

Frame Matcher::fresh(int32_t node) const {
  Frame f;
  f.node = node;
  const Node& n = g_->nodes[static_cast<size_t>(node)];
  if (n.kind == NodeKind::kString) {
    if (n.regex >= 0) f.bits = Regex::kStart;
    if (n.raw) f.phase = 1;
  }
  return f;
}

State Matcher::start() const {
  State s;
  Stack st;
  st.push_back(fresh(g_->root));
  s.stacks.push_back(std::move(st));
  return s;
}

void Matcher::pop_completed(Stack* s, std::vector<Tag>* tags) const {
  s->pop_back();
  while (!s->empty()) {
    const Frame& f = s->back();
    const Node& n = g_->nodes[static_cast<size_t>(f.node)];
    if (n.kind == NodeKind::kChoice && f.phase == 1) {  // a oneOf's alternative is complete
      tags->push_back({s->size(), f.node, f.pos});
    } else if (n.kind != NodeKind::kSeq || static_cast<size_t>(f.pos) < n.children.size()) {
      break;  // a sequence whose last child completed is complete too
    }
    s->pop_back();
  }
}

namespace {

// One frame's reaction to `sym` (kChoice forks and kRepeat's optional end
// are the caller's).
Step step_frame(const Grammar& g, Frame& f, const Node& n, int sym, int32_t* child) {
  Step r = Step::kReject;
  switch (n.kind) {
    case NodeKind::kChoice:
      break;
    case NodeKind::kSeq:
      if (static_cast<size_t>(f.pos) < n.children.size()) {
        *child = n.children[static_cast<size_t>(f.pos++)];
        r = Step::kPush;
      } else {
        r = Step::kPass;
      }
      break;
    case NodeKind::kRepeat: {  // the caller has forked when it may also end here
      const bool more = f.count < n.max_count, enough = f.count >= n.min_count;
      if (more) {
        ++f.count;
        *child = n.item;
        r = Step::kPush;
      } else {
        r = enough ? Step::kPass : Step::kReject;
      }
      break;
    }
    case NodeKind::kLiteral: {
      const auto& node = n.literal.nodes[static_cast<size_t>(f.pos)];
      const int32_t next = n.literal.child(f.pos, sym);
      if (next >= 0) {
        const auto& nn = n.literal.nodes[static_cast<size_t>(next)];
        f.pos = next;
        r = nn.terminal && nn.edges.empty() ? Step::kDone : Step::kConsumed;
      } else {
        r = node.terminal ? Step::kPass : Step::kReject;
      }
      break;
    }
    case NodeKind::kFreeText:
      if (sym >= 256) {
        r = f.need == 0 ? Step::kPass : Step::kReject;
      } else {
        r = lex_raw(&f, sym) == Lex::kReject ? Step::kReject : Step::kConsumed;
      }
      break;
    case NodeKind::kString: {
      if (f.phase == 0) {
        if (sym == '"') {
          f.phase = 1;
          r = Step::kConsumed;
        }
        break;
      }
      const bool at_rest = f.need == 0 && f.esc == 0;
      const bool can_end = at_rest && f.count >= n.min_count &&
                           (n.regex < 0 || g.regexes[static_cast<size_t>(n.regex)].accepts(f.bits));
      if (n.raw && sym >= 256) {
        r = can_end ? Step::kPass : Step::kReject;
        break;
      }
      if (!n.raw && sym == '"' && at_rest) {
        r = can_end ? Step::kDone : Step::kReject;
        break;
      }
      uint32_t cp = 0;
      const Lex l = n.raw ? lex_raw(&f, sym, &cp) : lex_json(&f, sym, &cp);
      if (l == Lex::kReject) break;
      r = Step::kConsumed;
      if (l == Lex::kMore && f.count + 1 > n.max_count) r = Step::kReject;  // no room for it
      if (l == Lex::kChar) {
        if (++f.count > n.max_count) {
          r = Step::kReject;
          break;
        }
        if (n.regex >= 0) {
          const Regex& re = g.regexes[static_cast<size_t>(n.regex)];
          f.bits = re.step(f.bits, cp);
          if (f.bits == 0 || sat_add(f.count, re.distance(f.bits)) > n.max_count) r = Step::kReject;
        }
      }
      break;
    }
    case NodeKind::kNumber: {
      if (n.range >= 0) {  // decimal bounds: number_range.h reads it
        const NumberRange& range = g.number_ranges[static_cast<size_t>(n.range)];
        const NumberCursor at = number_cursor(f);
        NumberCursor next = at;
        if (range.step(&next, sym)) {
          set_number_cursor(&f, next);
          r = Step::kConsumed;
        } else if (!is_number_symbol(sym) && range.can_end(at)) {
          r = Step::kPass;  // a digit or sign the range refused is no end either
        }
        break;
      }
      const bool neg = (f.bits & kNegBit) != 0;
      const int64_t d = digits(f.bits, 0);
      auto int_ok = [&](__int128 v, int64_t dd) {
        return !n.integer || integer_extra_digits(n, neg, v, dd) >= 0;
      };
      auto complete = [&] {
        if (f.phase == kNumZero || f.phase == kNumInt)
          return !n.integer || integer_extra_digits(n, neg, f.count, d) == 0;
        return !n.integer && (f.phase == kNumFrac || f.phase == kNumExp);
      };
      switch (f.phase) {
        case kNumStart:
        case kNumMinus:
          if (sym == '-' && f.phase == kNumStart) {
            f.bits |= kNegBit;
            if (n.integer && integer_extra_digits(n, true, 0, 0) < 0) break;
            f.phase = kNumMinus;
            r = Step::kConsumed;
          } else if (sym == '0') {
            if (n.integer && (f.phase == kNumMinus || !int_ok(0, 1))) break;  // no -0
            f.phase = kNumZero;
            f.bits = with_digits(f.bits, 0, 1);
            r = Step::kConsumed;
          } else if (sym >= '1' && sym <= '9') {
            if (!int_ok(sym - '0', 1)) break;
            f.phase = kNumInt;
            f.count = sym - '0';
            f.bits = with_digits(f.bits, 0, 1);
            r = Step::kConsumed;
          }
          break;
        case kNumZero:
        case kNumInt:
          if (f.phase == kNumInt && is_digit(sym)) {
            const __int128 v = static_cast<__int128>(f.count) * 10 + (sym - '0');
            if (d + 1 > (n.integer ? kMaxIntDigits : kMaxNumberDigits) || !int_ok(v, d + 1)) break;
            f.count = n.integer ? static_cast<int64_t>(v) : 0;
            f.bits = with_digits(f.bits, 0, d + 1);
            r = Step::kConsumed;
          } else if (!n.integer && sym == '.') {
            f.phase = kNumDot;
            r = Step::kConsumed;
          } else if (!n.integer && (sym == 'e' || sym == 'E')) {
            f.phase = kNumE;
            r = Step::kConsumed;
          } else {
            r = complete() ? Step::kPass : Step::kReject;
          }
          break;
        case kNumDot:
        case kNumFrac:
          if (is_digit(sym) && digits(f.bits, 1) < kMaxNumberDigits) {
            f.bits = with_digits(f.bits, 1, digits(f.bits, 1) + 1);
            f.phase = kNumFrac;
            r = Step::kConsumed;
          } else if (f.phase == kNumFrac && (sym == 'e' || sym == 'E')) {
            f.phase = kNumE;
            r = Step::kConsumed;
          } else if (f.phase == kNumFrac) {
            r = Step::kPass;
          }
          break;
        case kNumE:
          if (sym == '+' || sym == '-') {
            f.phase = kNumESign;
            r = Step::kConsumed;
            break;
          }
          [[fallthrough]];
        case kNumESign:
        case kNumExp:
          if (is_digit(sym) && digits(f.bits, 2) < kMaxExpDigits) {
            f.bits = with_digits(f.bits, 2, digits(f.bits, 2) + 1);
            f.phase = kNumExp;
            r = Step::kConsumed;
          } else if (f.phase == kNumExp) {
            r = Step::kPass;
          }
          break;
        default:
          break;
      }
      break;
    }
    case NodeKind::kArray:
      switch (f.phase) {
        case kArrStart:
          if (sym == '[') {
            f.phase = kArrOpen;
            r = Step::kConsumed;
          }
          break;
        case kArrOpen:
          if (sym == ']') {
            r = n.min_count == 0 ? Step::kDone : Step::kReject;
          } else if (n.max_count > 0) {
            f.phase = kArrAfter;
            f.count = 1;
            *child = n.item;
            r = Step::kPush;
          }
          break;
        case kArrAfter:
          if (sym == ',' && f.count < n.max_count) {
            f.phase = kArrComma;
            r = Step::kConsumed;
          } else if (sym == ']' && f.count >= n.min_count) {
            r = Step::kDone;
          }
          break;
        case kArrComma:
          f.phase = kArrAfter;
          ++f.count;
          *child = n.item;
          r = Step::kPush;
          break;
        default:
          break;
      }
      break;
    case NodeKind::kObject: {
      const uint64_t all =
          n.properties.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.properties.size()) - 1;
      const bool more_keys = n.additional >= 0 || (all & ~f.bits) != 0;
      switch (f.phase) {
        case kObjStart:
          if (sym == '{') {
            f.phase = kObjOpen;
            r = Step::kConsumed;
          }
          break;
        case kObjOpen:
        case kObjComma:
          if (sym == '"' && more_keys) {
            f.phase = kObjKey;
            f.pos = 0;
            r = Step::kConsumed;
          } else if (sym == '}' && f.phase == kObjOpen && (n.required & ~f.bits) == 0) {
            r = Step::kDone;
          }
          break;
        case kObjKey: {
          if (sym == '"' && f.need == 0 && f.esc == 0) {
            const int32_t p = f.pos >= 0 ? n.key_prop[static_cast<size_t>(f.pos)] : -1;
            if (p >= 0) {
              if (f.bits >> p & 1) break;  // a repeated key
              f.bits |= uint64_t{1} << p;
            } else if (n.additional < 0) {
              break;
            }
            f.count = p;
            f.phase = kObjKeyDone;
            r = Step::kConsumed;
            break;
          }
          if (lex_json(&f, sym) == Lex::kReject) break;
          if (f.pos >= 0) f.pos = n.keys.child(f.pos, sym);
          if (n.additional < 0 &&
              (f.pos < 0 || (n.key_props[static_cast<size_t>(f.pos)] & ~f.bits) == 0))
            break;
          r = Step::kConsumed;
          break;
        }
        case kObjKeyDone:
          if (sym == ':') {
            f.phase = kObjValue;
            r = Step::kConsumed;
          }
          break;
        case kObjValue:
          *child = f.count >= 0 ? n.properties[static_cast<size_t>(f.count)].node : n.additional;
          f.phase = kObjAfter;
          r = Step::kPush;
          break;
        case kObjAfter:
          if (sym == ',' && more_keys) {
            f.phase = kObjComma;
            r = Step::kConsumed;
          } else if (sym == '}' && (n.required & ~f.bits) == 0) {
            r = Step::kDone;
          }
          break;
        default:
          break;
      }
      break;
    }
  }
  return r;
}

}  // namespace

void Matcher::feed_stack(Stack s, int sym, std::vector<Tag> tags, std::vector<Out>* out,
                         int* budget) const {
  while (true) {
    if (s.empty() || --*budget < 0) return;
    Frame& f = s.back();
    const Node& n = g_->nodes[static_cast<size_t>(f.node)];
    Step r = Step::kReject;
    int32_t child = -1;
    switch (n.kind) {
      case NodeKind::kChoice: {
        for (size_t i = 0; i < n.children.size(); ++i) {
          Stack copy = s;
          if (n.one_of) {
            copy.back().phase = 1;
            copy.back().pos = static_cast<int32_t>(i);
            if (copy.size() >= kMaxDepth) continue;
            copy.push_back(fresh(n.children[i]));
          } else {
            copy.back() = fresh(n.children[i]);
          }
          feed_stack(std::move(copy), sym, tags, out, budget);
        }
        return;
      }
      case NodeKind::kRepeat:
        if (f.count < n.max_count && f.count >= n.min_count) {  // may end or go on: fork
          Stack copy = s;
          std::vector<Tag> copy_tags = tags;
          pop_completed(&copy, &copy_tags);
          feed_stack(std::move(copy), sym, std::move(copy_tags), out, budget);
        }
        r = step_frame(*g_, f, n, sym, &child);
        break;
      default:
        r = step_frame(*g_, f, n, sym, &child);
        break;
    }
    switch (r) {
      case Step::kReject:
        return;
      case Step::kConsumed:
        out->push_back({std::move(s), std::move(tags)});
        return;
      case Step::kDone:
        pop_completed(&s, &tags);
        out->push_back({std::move(s), std::move(tags)});
        return;
      case Step::kPass:
        pop_completed(&s, &tags);
        break;
      case Step::kPush:
        if (s.size() >= kMaxDepth) return;
        s.push_back(fresh(child));
        break;
    }
  }
}

void Matcher::canonicalize(Stack* s, size_t from) const {
  for (size_t i = from; i < s->size(); ++i) canonicalize_frame(&(*s)[i]);
}

void Matcher::canonicalize_frame(Frame* f) const {
  // Counts matter only up to the lower bound when there is no upper one.
  const Node& n = g_->nodes[static_cast<size_t>(f->node)];
  if ((n.kind == NodeKind::kString || n.kind == NodeKind::kArray || n.kind == NodeKind::kRepeat) &&
      n.max_count == std::numeric_limits<int64_t>::max() && f->count > n.min_count)
    f->count = n.min_count;
  // An integer's value matters only against bounds.
  if (n.kind == NodeKind::kNumber && !n.has_min && !n.has_max && n.range < 0) f->count = 0;
}

bool Matcher::clash(const std::vector<Tag>& tags) {
  for (size_t a = 0; a < tags.size(); ++a)
    for (size_t b = a + 1; b < tags.size(); ++b)
      if (tags[a].depth == tags[b].depth && tags[a].node == tags[b].node &&
          tags[a].alt != tags[b].alt)
        return true;
  return false;
}

// feed_stack's walk for one stack that meets no fork, stepping the output's
// stack in place (no copies beyond the first). Frames below the lowest the
// symbol reached are unchanged, hence still canonical.
Matcher::Single Matcher::feed_single(const Stack& in, int sym, State* out) const {
  thread_local std::vector<Tag> tags;
  tags.clear();
  out->stacks.resize(1);
  Stack& s = out->stacks[0];
  s = in;
  size_t low = s.size();
  int budget = 4096;
  while (true) {
    if (s.empty() || --budget < 0) return Single::kReject;
    low = std::min(low, s.size());
    Frame& f = s.back();
    const Node& n = g_->nodes[static_cast<size_t>(f.node)];
    if (n.kind == NodeKind::kChoice ||
        (n.kind == NodeKind::kRepeat && f.count < n.max_count && f.count >= n.min_count))
      return Single::kFork;
    int32_t child = -1;
    const Step r = step_frame(*g_, f, n, sym, &child);
    if (r == Step::kReject) return Single::kReject;
    if (r == Step::kConsumed) break;
    if (r == Step::kDone) {
      pop_completed(&s, &tags);
      break;
    }
    if (r == Step::kPass) {
      pop_completed(&s, &tags);
    } else {  // kPush
      if (s.size() >= kMaxDepth) return Single::kReject;
      s.push_back(fresh(child));
    }
  }
  canonicalize(&s, low > 0 ? low - 1 : 0);
  return clash(tags) ? Single::kReject : Single::kAccept;
}

bool Matcher::feed(const State& in, int symbol, State* out) const {
  if (fast_path_ && in.stacks.size() == 1) {
    const Single r = feed_single(in.stacks[0], symbol, out);
    if (r != Single::kFork) {
      if (r == Single::kReject) out->stacks.clear();
      return r == Single::kAccept;
    }
  }
  thread_local std::vector<Out> results;
  results.clear();
  int budget = 4096;
  for (const Stack& s : in.stacks) feed_stack(s, symbol, {}, &results, &budget);
  out->stacks.clear();
  for (Out& r : results) canonicalize(&r.stack, 0);
  if (results.size() == 1 && results[0].tags.empty()) {
    out->stacks.push_back(std::move(results[0].stack));
    return true;
  }
  // Equal stacks merge; a group where one oneOf completed through two
  // alternatives at once is refused.
  std::vector<bool> used(results.size(), false);
  for (size_t i = 0; i < results.size(); ++i) {
    if (used[i]) continue;
    std::vector<Tag> tags = results[i].tags;
    for (size_t j = i + 1; j < results.size(); ++j)
      if (!used[j] && results[j].stack == results[i].stack) {
        used[j] = true;
        tags.insert(tags.end(), results[j].tags.begin(), results[j].tags.end());
      }
    if (!clash(tags) && out->stacks.size() < kMaxStacks)
      out->stacks.push_back(std::move(results[i].stack));
  }
  return !out->stacks.empty();
}

State Matcher::entered(const State& s) const {
  State out = s;
  if (out.stacks.size() != 1) return out;
  Stack& st = out.stacks[0];
  while (!st.empty() && st.size() < kMaxDepth) {
    Frame& f = st.back();
    const Node& n = g_->nodes[static_cast<size_t>(f.node)];
    if (n.kind != NodeKind::kSeq || static_cast<size_t>(f.pos) >= n.children.size()) break;
    st.push_back(fresh(n.children[static_cast<size_t>(f.pos++)]));
  }
  return out;
}

bool Matcher::step_inside(Frame* f, int byte) const {
  const Node& n = g_->nodes[static_cast<size_t>(f->node)];
  int32_t child = -1;
  if (step_frame(*g_, *f, n, byte, &child) != Step::kConsumed) return false;
  canonicalize_frame(f);
  return true;
}

bool Matcher::accepting(const State& s) const {
  for (const Stack& st : s.stacks)
    if (st.empty()) return true;
  return false;
}

int64_t Matcher::distance(const State& s) const {
  int64_t best = kInfinite;
  for (const Stack& st : s.stacks) best = std::min(best, stack_distance(st));
  return best;
}

int64_t Matcher::stack_distance(const Stack& s) const {
  int64_t d = 0;
  for (const Frame& f : s) d = sat_add(d, frame_rest(f));
  return d;
}

}  // namespace k3::grammar
