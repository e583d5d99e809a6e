#include "shared/grammar/number_range.h"

#include <algorithm>
#include <limits>

#include "shared/grammar/grammar.h"

namespace k3::grammar {
namespace {

// How a number's digits so far compare with a bound's.
enum : uint8_t { kEqual = 0, kBelow = 1, kAbove = 2 };

bool is_digit(int s) {
  return s >= '0' && s <= '9';
}

int64_t exponent_cost(int64_t e) {
  if (e == 0) return 0;  // no exponent
  const int64_t a = e < 0 ? -e : e;
  if (a > 99) return kInfinite;
  return 1 + (e < 0 ? 1 : 0) + (a >= 10 ? 2 : 1);
}

int sign_of(int64_t v) {
  return (v > 0) - (v < 0);
}

}  // namespace

StatusOr<Decimal> parse_decimal(std::string_view s) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(cat("'", s, "' is not a JSON number"));
  };
  Decimal d;
  size_t i = 0;
  if (i < s.size() && s[i] == '-') {
    d.neg = true;
    ++i;
  }
  std::string mant;
  int64_t point = -1;  // digits before the point
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) mant += s[i++];
  if (mant.empty() || (mant.size() > 1 && mant[0] == '0')) return bad();
  point = static_cast<int64_t>(i - start);
  if (i < s.size() && s[i] == '.') {
    ++i;
    const size_t f = i;
    while (i < s.size() && is_digit(s[i])) mant += s[i++];
    if (i == f) return bad();
  }
  int64_t e = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    const size_t f = i;
    while (i < s.size() && is_digit(s[i])) {
      e = e * 10 + (s[i++] - '0');
      if (e > 1000000000) return bad();
    }
    if (i == f) return bad();
    if (eneg) e = -e;
  }
  if (i != s.size()) return bad();
  // 0.mant × 10^point × 10^e, then without leading and trailing zeros.
  size_t lead = 0;
  while (lead < mant.size() && mant[lead] == '0') ++lead;
  if (lead == mant.size()) return Decimal{};  // zero (also "-0")
  size_t end = mant.size();
  while (mant[end - 1] == '0') --end;
  d.digits = mant.substr(lead, end - lead);
  d.exp = static_cast<int32_t>(point + e - static_cast<int64_t>(lead));
  return d;
}

int compare_decimals(const Decimal& a, const Decimal& b) {
  const int sa = a.zero() ? 0 : a.neg ? -1 : 1, sb = b.zero() ? 0 : b.neg ? -1 : 1;
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  int mag = 0;
  if (a.exp != b.exp) {
    mag = a.exp < b.exp ? -1 : 1;
  } else {
    const int c = a.digits.compare(b.digits);  // lexicographic: equal lengths or a prefix
    mag = sign_of(c);
  }
  return sa > 0 ? mag : -mag;
}

// The bounds on a nonzero |value| for one sign: |value| >= A (when has_a)
// and <= B (when has_b); `none` when no nonzero magnitude fits.
struct NumberRange::Magnitude {
  bool none = false;
  bool has_a = false, has_b = false;
  int a = 0, b = 0;  // which bound (0 lower, 1 upper) gives A and B
};

StatusOr<NumberRange> NumberRange::make(Bound lo, Bound hi, const std::string& path) {
  NumberRange r;
  r.b_ = {std::move(lo), std::move(hi)};
  for (Bound& b : r.b_)
    if (b.value.zero()) b.value.neg = false;
  r.fill_need_tables();
  if (r.rest(NumberCursor{}) >= kInfinite)
    return absl::InvalidArgumentError(cat(
        path, ": no number lies within the bounds (minimum/maximum and their exclusive forms)"));
  return r;
}

void NumberRange::fill_need_tables() {
  constexpr int8_t kNone = -1;
  need_.assign(2 * 2 * 2 * (kPositions + 1), kNone);
  for (int sign = 0; sign < 2; ++sign) {
    // A and B as in Magnitude, taken from the bounds for this sign.
    const Bound& ba = b_[sign == 0 ? 0 : 1];
    const Bound& bb = b_[sign == 0 ? 1 : 0];
    const std::string& da = ba.value.digits;
    const std::string& db = bb.value.digits;
    const auto digit = [](const std::string& s, int j) {
      return j < static_cast<int>(s.size()) ? s[static_cast<size_t>(j)] - '0' : 0;
    };
    const auto accept = [&](int j, bool ta, bool tb) {
      return (!ta || (j >= static_cast<int>(da.size()) && !ba.open)) &&
             (!tb || j < static_cast<int>(db.size()) || !bb.open);
    };
    // f[j][ta*2+tb]: fewest digits from position j.
    std::vector<std::array<int, 4>> f(kPositions + 1, {kNone, kNone, kNone, kNone});
    const auto next = [&](int j, int t, int lo_digit) {
      int best = kNone;
      const bool ta = t >> 1, tb = t & 1;
      for (int d = lo_digit; d <= 9; ++d) {
        if ((ta && d < digit(da, j)) || (tb && d > digit(db, j))) continue;
        const int t2 = (ta && d == digit(da, j) ? 2 : 0) | (tb && d == digit(db, j) ? 1 : 0);
        const int v = f[static_cast<size_t>(j + 1)][static_cast<size_t>(t2)];
        if (v >= 0 && (best < 0 || v + 1 < best)) best = v + 1;
      }
      return best;
    };
    for (int j = kPositions - 1; j >= 0; --j)
      for (int t = 0; t < 4; ++t)
        f[static_cast<size_t>(j)][static_cast<size_t>(t)] =
            accept(j, t >> 1, t & 1) ? 0 : next(j, t, 0);
    for (int t = 0; t < 4; ++t) {
      const int na = t >> 1, nb = t & 1;
      int8_t* row = &need_[static_cast<size_t>(((sign * 2 + na) * 2 + nb) * (kPositions + 1))];
      for (int k = 0; k < kPositions; ++k) {
        const int v = f[static_cast<size_t>(k)][static_cast<size_t>(t)];
        row[k] = static_cast<int8_t>(v);
      }
      row[kFirst] = static_cast<int8_t>(next(0, t, 1));  // the first digit is not 0
    }
  }
}

int8_t NumberRange::need(int sign, bool need_a, bool need_b, bool first, int k) const {
  if (!first && k >= kPositions) return need_a || need_b ? -1 : 0;
  return need_[static_cast<size_t>(((sign * 2 + need_a) * 2 + need_b) * (kPositions + 1) +
                                   (first ? kFirst : k))];
}

bool NumberRange::contains(const NumberCursor& c, int32_t exponent) const {
  if (c.sig == 0) {  // zero, whatever its sign and exponent
    const Bound& lo = b_[0];
    const Bound& hi = b_[1];
    const int slo = lo.value.zero() ? 0 : lo.value.neg ? -1 : 1;
    const int shi = hi.value.zero() ? 0 : hi.value.neg ? -1 : 1;
    return (!lo.present || slo < 0 || (slo == 0 && !lo.open)) &&
           (!hi.present || shi > 0 || (shi == 0 && !hi.open));
  }
  const int sv = c.neg ? -1 : 1;
  const int64_t p = static_cast<int64_t>(c.p) + exponent;
  for (int i = 0; i < 2; ++i) {
    const Bound& b = b_[static_cast<size_t>(i)];
    if (!b.present) continue;
    const int sb = b.value.zero() ? 0 : b.value.neg ? -1 : 1;
    int r = 0;
    if (sv != sb) {
      r = sv < sb ? -1 : 1;
    } else {
      int mag = 0;
      if (p != b.value.exp)
        mag = p < b.value.exp ? -1 : 1;
      else if (c.cmp[i] != kEqual)
        mag = c.cmp[i] == kBelow ? -1 : 1;
      else
        mag = c.sig < b.value.digits.size() ? -1 : 0;
      r = sv > 0 ? mag : -mag;
    }
    if (i == 0 && !(r > 0 || (r == 0 && !b.open))) return false;
    if (i == 1 && !(r < 0 || (r == 0 && !b.open))) return false;
  }
  return true;
}

bool NumberRange::can_end(const NumberCursor& c) const {
  switch (c.phase) {
    case kNumZero:
    case kNumInt:
    case kNumFrac:
      return contains(c, 0);
    case kNumExp:
      return contains(c, c.exp_neg ? -c.exp_value : c.exp_value);
    default:
      return false;
  }
}

int64_t NumberRange::rest(const NumberCursor& c) const {
  switch (c.phase) {
    case kNumStart: {
      NumberCursor neg = c;
      neg.neg = 1;
      return std::min(rest_mantissa(c, false), sat_add(1, rest_mantissa(neg, true)));
    }
    case kNumE:
    case kNumESign:
    case kNumExp:
      return rest_exponent(c);
    default:
      return rest_mantissa(c, c.neg != 0);
  }
}

int64_t NumberRange::rest_exponent(const NumberCursor& c) const {
  int64_t best = kInfinite;
  const int n = c.exp_digits;
  for (int neg = 0; neg < 2; ++neg) {
    int64_t sign_cost = 0;
    if (c.phase == kNumE) {
      sign_cost = neg;  // '-', or no sign
    } else if (neg != c.exp_neg) {
      continue;
    }
    // t digits in all, the first n of them written (value c.exp_value).
    for (int t = std::max(n, 1); t <= kMaxExponentDigits; ++t) {
      int scale = 1;
      for (int k = n; k < t; ++k) scale *= 10;
      for (int r = 0; r < scale; ++r) {
        const int e = c.exp_value * scale + r;
        if (contains(c, neg ? -e : e)) {
          best = std::min<int64_t>(best, sign_cost + (t - n));
          break;  // more r: the same cost
        }
      }
    }
  }
  return best;
}

int64_t NumberRange::rest_mantissa(const NumberCursor& c, bool neg) const {
  int64_t best = kInfinite;
  const int sign = neg ? 1 : 0;
  // Zero (D empty): "0", "-0", "0.0", or as it stands.
  if (c.sig == 0 && contains(NumberCursor{}, 0)) {
    switch (c.phase) {
      case kNumStart:
      case kNumMinus:
      case kNumDot:
        best = 1;
        break;
      case kNumZero:
      case kNumFrac:
        best = 0;
        break;
      default:
        break;
    }
  }
  // The bounds on a nonzero magnitude for this sign.
  Magnitude m;
  {
    const Bound& lo = b_[0];
    const Bound& hi = b_[1];
    if (!neg) {
      m.has_a = lo.present && !lo.value.neg && !lo.value.zero();
      m.a = 0;
      if (hi.present) {
        if (hi.value.neg || hi.value.zero()) m.none = true;
        m.has_b = true;
        m.b = 1;
      }
    } else {
      m.has_a = hi.present && hi.value.neg;
      m.a = 1;
      if (lo.present) {
        if (!lo.value.neg) m.none = true;
        m.has_b = true;
        m.b = 0;
      }
    }
  }
  if (m.none) return best;
  const int64_t exp_a = m.has_a ? b_[static_cast<size_t>(m.a)].value.exp : 0;
  const int64_t exp_b = m.has_b ? b_[static_cast<size_t>(m.b)].value.exp : 0;
  // The fewest significant digits to append (the first nonzero when `first`)
  // for a final decimal exponent P; -1: none.
  const auto digits_for = [&](int64_t P, bool first) -> int {
    if (m.has_a && P < exp_a) return -1;
    if (m.has_b && P > exp_b) return -1;
    bool na = false, nb = false;
    if (m.has_a && P == exp_a) {
      if (c.cmp[m.a] == kBelow) return -1;
      na = c.cmp[m.a] == kEqual;
    }
    if (m.has_b && P == exp_b) {
      if (c.cmp[m.b] == kAbove) return -1;
      nb = c.cmp[m.b] == kEqual;
    }
    return need(sign, na, nb, first, c.sig);
  };
  // The cheapest final exponent P for a value whose point leaves it at p2
  // (P - p2 is the exponent written), with digits appended: cost of both.
  const auto cheapest = [&](int64_t p2, bool first, const auto& cost_of_digits) {
    int64_t out = kInfinite;
    const auto consider = [&](int64_t P) {
      const int L = digits_for(P, first);
      if (L < 0) return;
      out = std::min(out, sat_add(cost_of_digits(L), exponent_cost(P - p2)));
    };
    if (m.has_a) consider(exp_a);
    if (m.has_b) consider(exp_b);
    // Strictly between: every digit string fits; the one nearest p2.
    int64_t lo = m.has_a ? exp_a + 1 : std::numeric_limits<int32_t>::min();
    int64_t hi = m.has_b ? exp_b - 1 : std::numeric_limits<int32_t>::max();
    if (lo <= hi) consider(std::clamp(p2, lo, hi));
    return out;
  };
  const int64_t kMax = kMaxMantissaDigits;
  // Integer digits (a nonzero first one when none yet), then maybe a
  // fraction, then maybe an exponent.
  if (c.phase == kNumStart || c.phase == kNumMinus || c.phase == kNumInt) {
    const int64_t have = c.int_digits;
    const bool first = have == 0;
    for (int64_t i = first ? 1 : 0; have + i <= kMax; ++i) {
      best = std::min(best, cheapest(have + i, first, [&](int L) -> int64_t {
                        const int64_t f = std::max<int64_t>(0, L - i);
                        if (f > kMax) return kInfinite;
                        return i + (f > 0 ? 1 + f : 0);
                      }));
    }
  }
  // Fraction digits after significant ones.
  if ((c.phase == kNumDot || c.phase == kNumFrac) && c.sig > 0) {
    best = std::min(best, cheapest(c.p, false, [&](int L) -> int64_t {
                      const int64_t f = std::max<int64_t>(L, c.phase == kNumDot ? 1 : 0);
                      if (c.frac_digits + f > kMax) return kInfinite;
                      return f;
                    }));
  }
  // Zeros after the point, then the first significant digit: after "0" (or
  // writing it first).
  if (c.sig == 0 && (c.phase == kNumStart || c.phase == kNumMinus || c.phase == kNumZero ||
                     c.phase == kNumDot || c.phase == kNumFrac)) {
    const int64_t prefix = c.phase == kNumStart || c.phase == kNumMinus ? 2  // "0."
                           : c.phase == kNumZero                        ? 1  // "."
                                                                        : 0;
    for (int64_t z = 0; c.frac_digits + z < kMax; ++z) {
      best = std::min(best, cheapest(c.p - z, true, [&](int L) -> int64_t {
                        if (c.frac_digits + z + L > kMax) return kInfinite;
                        return prefix + z + L;
                      }));
    }
  }
  return best;
}

bool NumberRange::step(NumberCursor* c, int sym) const {
  const auto significant = [&](int d) {
    for (int i = 0; i < 2; ++i) {
      if (c->cmp[i] != kEqual) continue;
      const std::string& bd = b_[static_cast<size_t>(i)].value.digits;
      const int want = c->sig < bd.size() ? bd[c->sig] - '0' : 0;
      if (d != want) c->cmp[i] = d < want ? kBelow : kAbove;
    }
    ++c->sig;
  };
  const int d = sym - '0';
  switch (c->phase) {
    case kNumStart:
    case kNumMinus:
      if (sym == '-' && c->phase == kNumStart) {
        c->neg = 1;
        c->phase = kNumMinus;
      } else if (sym == '0') {
        c->phase = kNumZero;
        c->int_digits = 1;
      } else if (sym >= '1' && sym <= '9') {
        c->phase = kNumInt;
        c->int_digits = 1;
        c->p = 1;
        significant(d);
      } else {
        return false;
      }
      break;
    case kNumZero:
    case kNumInt:
      if (c->phase == kNumInt && is_digit(sym)) {
        if (c->int_digits >= kMaxMantissaDigits) return false;
        ++c->int_digits;
        ++c->p;
        significant(d);
      } else if (sym == '.') {
        c->phase = kNumDot;
      } else if (sym == 'e' || sym == 'E') {
        c->phase = kNumE;
      } else {
        return false;
      }
      break;
    case kNumDot:
    case kNumFrac:
      if (is_digit(sym)) {
        if (c->frac_digits >= kMaxMantissaDigits) return false;
        ++c->frac_digits;
        if (c->sig == 0 && d == 0)
          --c->p;
        else
          significant(d);
        c->phase = kNumFrac;
      } else if (c->phase == kNumFrac && (sym == 'e' || sym == 'E')) {
        c->phase = kNumE;
      } else {
        return false;
      }
      break;
    case kNumE:
      if (sym == '+' || sym == '-') {
        c->exp_neg = sym == '-';
        c->phase = kNumESign;
        break;
      }
      [[fallthrough]];
    case kNumESign:
    case kNumExp:
      if (!is_digit(sym) || c->exp_digits >= kMaxExponentDigits) return false;
      c->exp_value = static_cast<uint8_t>(c->exp_value * 10 + d);
      ++c->exp_digits;
      c->phase = kNumExp;
      break;
    default:
      return false;
  }
  return rest(*c) < kInfinite;
}

}  // namespace k3::grammar
