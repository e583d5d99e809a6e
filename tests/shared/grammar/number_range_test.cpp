// shared/grammar/number_range.h against a brute-force exact comparison of
// decimal strings (big integers as digit strings, aligned on a common
// exponent): random bounds and random spellings of numbers near them, every
// number accepted exactly when it is within; rest() the exact fewest symbols
// to a number in range at every state of random walks (so no walk meets a
// dead end); and the schema keywords through the whole matcher.
#include "shared/grammar/number_range.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "shared/grammar/grammar.h"
#include "tests/shared/grammar/grammar_test_util.h"

namespace k3::grammar {
namespace {

using testing::accepts;
using testing::compile_error;

// --- The reference: a JSON number as sign, integer digits M and exponent E
// (value M × 10^E), compared by aligning both on the smaller exponent.
struct Exact {
  bool neg = false;
  std::string m;  // no leading zeros; "" is zero
  long e = 0;
};

Exact exact(const std::string& s) {
  Exact x;
  size_t i = 0;
  if (s[i] == '-') {
    x.neg = true;
    ++i;
  }
  std::string digits;
  long frac = 0;
  bool in_frac = false;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      in_frac = true;
      continue;
    }
    digits += s[i];
    if (in_frac) ++frac;
  }
  long e = 0;
  if (i < s.size()) e = std::stol(s.substr(i + 1));  // "+5", "-05", "7"
  size_t lead = 0;
  while (lead < digits.size() && digits[lead] == '0') ++lead;
  x.m = digits.substr(lead);
  x.e = e - frac;
  if (x.m.empty()) x.neg = false;
  return x;
}

// |a| vs |b| for nonzero a, b.
int compare_magnitudes(const Exact& a, const Exact& b) {
  const long e = std::min(a.e, b.e);
  const std::string ma = a.m + std::string(static_cast<size_t>(a.e - e), '0');
  const std::string mb = b.m + std::string(static_cast<size_t>(b.e - e), '0');
  if (ma.size() != mb.size()) return ma.size() < mb.size() ? -1 : 1;
  return ma < mb ? -1 : ma > mb ? 1 : 0;
}

int compare_exact(const std::string& as, const std::string& bs) {
  const Exact a = exact(as), b = exact(bs);
  const int sa = a.m.empty() ? 0 : a.neg ? -1 : 1, sb = b.m.empty() ? 0 : b.neg ? -1 : 1;
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  const int m = compare_magnitudes(a, b);
  return sa > 0 ? m : -m;
}

struct Bounds {
  bool has_lo = false, lo_open = false, has_hi = false, hi_open = false;
  std::string lo, hi;
  bool contains(const std::string& x) const {
    if (has_lo) {
      const int c = compare_exact(x, lo);
      if (c < 0 || (c == 0 && lo_open)) return false;
    }
    if (has_hi) {
      const int c = compare_exact(x, hi);
      if (c > 0 || (c == 0 && hi_open)) return false;
    }
    return true;
  }
  std::string describe() const {
    return (has_lo ? (lo_open ? "(" : "[") + lo : std::string("(-inf")) + ", " +
           (has_hi ? hi + (hi_open ? ")" : "]") : std::string("inf)"));
  }
};

StatusOr<NumberRange> make_range(const Bounds& b) {
  NumberRange::Bound lo, hi;
  if (b.has_lo) {
    auto d = parse_decimal(b.lo);
    if (!d.ok()) return d.status();
    lo = {true, b.lo_open, *d};
  }
  if (b.has_hi) {
    auto d = parse_decimal(b.hi);
    if (!d.ok()) return d.status();
    hi = {true, b.hi_open, *d};
  }
  return NumberRange::make(lo, hi, "#");
}

// Whether the range reads `text` as a complete number in range.
bool range_accepts(const NumberRange& r, const std::string& text) {
  NumberCursor c;
  for (char ch : text)
    if (!r.step(&c, static_cast<unsigned char>(ch))) return false;
  return r.can_end(c);
}

// A JSON number within the matcher's limits (20 + 20 digits, 2 exponent digits).
bool well_formed(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  const size_t a = i;
  while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const size_t int_len = i - a;
  if (int_len == 0 || int_len > 20 || (int_len > 1 && s[a] == '0')) return false;
  if (i < s.size() && s[i] == '.') {
    const size_t f = ++i;
    while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == f || i - f > 20) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t f = i;
    while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == f || i - f > 2) return false;
  }
  return i == s.size();
}

// Random decimal text: 1-4 significant digits (sometimes up to 17), sometimes
// a fraction or an exponent, either sign.
std::string random_decimal(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string s;
  if (pick(3) == 0) s += '-';
  const int shape = pick(5);
  if (shape == 4) {  // up to 17 significant digits (a double's), exponent up to ±30
    s += static_cast<char>('1' + pick(9));
    const int n = pick(17);
    std::string frac;
    for (int i = 0; i < n; ++i) frac += static_cast<char>('0' + pick(10));
    return s + (frac.empty() ? "" : "." + frac) + "e" + std::to_string(pick(61) - 30);
  }
  if (shape == 0) return s + std::to_string(pick(2000));
  if (shape == 1) {
    s += std::to_string(pick(100)) + ".";
    const int n = 1 + pick(4);
    for (int i = 0; i < n; ++i) s += static_cast<char>('0' + pick(10));
    return s;
  }
  if (shape == 2) return s + std::to_string(1 + pick(9)) + "e" + std::to_string(pick(9) - 4);
  return s + "0.0" + std::to_string(1 + pick(99));
}

// Spellings near `b`: itself, with digits appended or removed, exponent
// rewritten, trailing zeros, the neighbouring last digit, zero and -0.
std::vector<std::string> near(const std::string& b, std::mt19937& rng) {
  std::vector<std::string> out = {b, "0", "-0", "0.0", "-0.0e3", "1", "-1", "1e2", "100"};
  const Exact x = exact(b);
  const std::string sign = x.neg ? "-" : "";
  if (x.m.empty()) return out;
  // M × 10^E written as M e E, as 0.M e (E + |M|), and as a plain decimal.
  out.push_back(sign + x.m + "e" + std::to_string(x.e));
  out.push_back(sign + "0." + x.m + "e" + std::to_string(x.e + static_cast<long>(x.m.size())));
  out.push_back(sign + x.m + "0e" + std::to_string(x.e - 1));
  for (const char* tail : {"0", "1", "9", "0001", "000000000000000055"}) {
    out.push_back(sign + "0." + x.m + tail + "e" +
                  std::to_string(x.e + static_cast<long>(x.m.size())));
    out.push_back(sign + x.m + tail + "e" +
                  std::to_string(x.e - static_cast<long>(std::string(tail).size())));
  }
  // Last digit one up and down.
  for (int delta : {-1, 1}) {
    std::string m = x.m;
    const int last = m.back() - '0' + delta;
    if (last < 0 || last > 9) continue;
    m.back() = static_cast<char>('0' + last);
    out.push_back(sign + m + "e" + std::to_string(x.e));
  }
  if (x.m.size() > 1)
    out.push_back(sign + x.m.substr(0, x.m.size() - 1) + "e" + std::to_string(x.e + 1));
  // Plain decimals when the exponent is small.
  if (x.e >= 0 && x.e < 5) out.push_back(sign + x.m + std::string(static_cast<size_t>(x.e), '0'));
  if (x.e < 0 && x.e > -8) {
    std::string m =
        std::string(
            static_cast<size_t>(std::max<long>(0, -x.e + 1 - static_cast<long>(x.m.size()))), '0') +
        x.m;
    const size_t point = m.size() - static_cast<size_t>(-x.e);
    std::string plain = m.substr(0, point) + "." + m.substr(point);
    out.push_back(sign + plain);
    out.push_back(sign + plain + "0");
  }
  out.push_back(std::to_string(static_cast<int>(rng() % 200) - 100) + "." +
                std::to_string(rng() % 1000));
  return out;
}

Bounds random_bounds(std::mt19937& rng) {
  Bounds b;
  b.has_lo = rng() % 4 != 0;
  b.has_hi = rng() % 4 != 0;
  b.lo_open = rng() % 2;
  b.hi_open = rng() % 2;
  b.lo = random_decimal(rng);
  b.hi = rng() % 5 == 0 ? b.lo : random_decimal(rng);
  if (b.has_lo && b.has_hi && compare_exact(b.lo, b.hi) > 0) std::swap(b.lo, b.hi);
  return b;
}

TEST(NumberRange, ParseDecimalIsExact) {
  const auto d = parse_decimal("-0.0012500e3");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->neg);
  EXPECT_EQ(d->digits, "125");
  EXPECT_EQ(d->exp, 1);  // -0.125 × 10^1
  EXPECT_TRUE(parse_decimal("-0")->zero());
  EXPECT_EQ(compare_decimals(*parse_decimal("1e2"), *parse_decimal("100.0")), 0);
  EXPECT_EQ(compare_decimals(*parse_decimal("0.1"), *parse_decimal("0.1000000000000000055")), -1);
  EXPECT_EQ(compare_decimals(*parse_decimal("-0"), *parse_decimal("0")), 0);
  for (const char* bad : {"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "1e9999999999"})
    EXPECT_FALSE(parse_decimal(bad).ok()) << bad;
}

TEST(NumberRange, AcceptsExactlyTheNumbersWithinRandomBounds) {
  std::mt19937 rng(29);
  int checked = 0, inside = 0, empty = 0;
  for (int round = 0; round < 2000; ++round) {
    const Bounds b = random_bounds(rng);
    auto r = make_range(b);
    // An empty range is refused; otherwise some number is within.
    const bool nonempty =
        !b.has_lo || !b.has_hi || compare_exact(b.lo, b.hi) < 0 || (!b.lo_open && !b.hi_open);
    ASSERT_EQ(r.ok(), nonempty) << b.describe() << " " << r.status();
    if (!r.ok()) {
      ++empty;
      continue;
    }
    std::vector<std::string> cases;
    for (const std::string& s : {b.lo, b.hi})
      for (std::string& c : near(s, rng)) cases.push_back(std::move(c));
    for (int i = 0; i < 20; ++i) cases.push_back(random_decimal(rng));
    for (const std::string& c : cases) {
      if (!well_formed(c)) continue;
      const bool want = b.contains(c);
      ASSERT_EQ(range_accepts(*r, c), want) << b.describe() << " number " << c;
      ++checked;
      inside += want;
    }
  }
  EXPECT_GT(checked, 40000);
  EXPECT_GT(inside, checked / 5);
  EXPECT_GT(empty, 5);
}

// rest() is exact and never infinite on a state reached: 0 exactly where the
// number may end, some symbol takes it one closer, none more than one.
void check_walks(const NumberRange& r, const std::string& what, std::mt19937& rng, int walks) {
  static const std::string kSymbols = "0123456789-+.eE";
  for (int w = 0; w < walks; ++w) {
    NumberCursor c;
    std::string text;
    for (int step = 0; step < 60; ++step) {
      const int64_t d = r.rest(c);
      ASSERT_LT(d, kInfinite) << what << " after '" << text << "'";
      ASSERT_EQ(d == 0, r.can_end(c)) << what << " after '" << text << "'";
      std::vector<char> ok;
      bool closer = false;
      for (char s : kSymbols) {
        NumberCursor n = c;
        if (!r.step(&n, s)) continue;
        const int64_t dn = r.rest(n);
        ASSERT_GE(dn, d - 1) << what << " after '" << text << "' then " << s;
        closer = closer || dn == d - 1;
        ok.push_back(s);
      }
      ASSERT_TRUE(d == 0 || closer) << what << " after '" << text << "': rest " << d;
      if (ok.empty() || (d == 0 && rng() % 4 == 0)) break;
      const char s = ok[rng() % ok.size()];
      ASSERT_TRUE(r.step(&c, s));
      text += s;
    }
    if (r.can_end(c)) {
      ASSERT_TRUE(well_formed(text)) << text;
    }
  }
}

TEST(NumberRange, EveryStateReachedCanFinishAndRestIsExact) {
  std::mt19937 rng(7);
  for (int round = 0; round < 400; ++round) {
    const Bounds b = random_bounds(rng);
    auto r = make_range(b);
    if (!r.ok()) continue;
    check_walks(*r, b.describe(), rng, 30);
  }
  // Single points and tight ranges.
  for (const char* point : {"0.5", "0", "-7", "1e-7", "123456789.123", "-0.001", "1e90",
                            "0.30000000000000004", "18446744073709551615", "-0.00999e-97"}) {
    Bounds b;
    b.has_lo = b.has_hi = true;
    b.lo = b.hi = point;
    auto r = make_range(b);
    ASSERT_TRUE(r.ok()) << point;
    check_walks(*r, point, rng, 40);
    EXPECT_TRUE(range_accepts(*r, point)) << point;
  }
}

TEST(NumberRange, EdgeCases) {
  const auto range = [](const char* lo, bool lo_open, const char* hi, bool hi_open) {
    Bounds b;
    b.has_lo = lo != nullptr;
    b.has_hi = hi != nullptr;
    if (lo) b.lo = lo;
    if (hi) b.hi = hi;
    b.lo_open = lo_open;
    b.hi_open = hi_open;
    return make_range(b);
  };
  // [0.5, 0.5]: still a number to write, in every spelling.
  auto half = range("0.5", false, "0.5", false);
  ASSERT_TRUE(half.ok());
  for (const char* s : {"0.5", "0.50", "5e-1", "5E-1", "50e-2", "0.05e1", "5.0e-01"})
    EXPECT_TRUE(range_accepts(*half, s)) << s;
  for (const char* s : {"0.51", "0.4999", "5", "0", "-0.5"})
    EXPECT_FALSE(range_accepts(*half, s)) << s;
  EXPECT_EQ(half->rest(NumberCursor{}), 3);  // "0.5"
  // Above 0.1 by a double's rounding error is above.
  auto tenth = range(nullptr, false, "0.1", false);
  EXPECT_TRUE(range_accepts(*tenth, "0.1"));
  EXPECT_FALSE(range_accepts(*tenth, "0.1000000000000000055"));
  EXPECT_TRUE(range_accepts(*tenth, "0.0999999999999999999"));
  // 1e2 is 100.
  auto hundred = range(nullptr, false, "100", false);
  EXPECT_TRUE(range_accepts(*hundred, "1e2"));
  EXPECT_TRUE(range_accepts(*hundred, "100.000"));
  EXPECT_FALSE(range_accepts(*hundred, "1.00000000000000000001e2"));
  auto below_hundred = range(nullptr, false, "100", true);
  EXPECT_FALSE(range_accepts(*below_hundred, "1e2"));
  EXPECT_TRUE(range_accepts(*below_hundred, "99.99999999999999999999"));
  // -0 is 0.
  auto nonneg = range("0", false, nullptr, false);
  EXPECT_TRUE(range_accepts(*nonneg, "-0"));
  EXPECT_TRUE(range_accepts(*nonneg, "-0.0e-5"));
  EXPECT_FALSE(range_accepts(*nonneg, "-1e-99"));
  auto positive = range("0", true, nullptr, false);
  EXPECT_FALSE(range_accepts(*positive, "-0"));
  EXPECT_FALSE(range_accepts(*positive, "0.000"));
  EXPECT_TRUE(range_accepts(*positive, "1e-99"));
  // Empty ranges are refused.
  EXPECT_FALSE(range("2", false, "1", false).ok());
  EXPECT_FALSE(range("1", true, "1", false).ok());
  EXPECT_FALSE(range("0", true, "0", true).ok());
  // Beyond what a number here can spell (20 + 20 digits, 2 exponent digits).
  EXPECT_FALSE(range("1e200", false, nullptr, false).ok());
  auto tiny = range("1e-200", true, nullptr, false);
  ASSERT_TRUE(tiny.ok());
  EXPECT_TRUE(range_accepts(*tiny, "1e-99"));
  EXPECT_FALSE(range_accepts(*tiny, "0"));
}

TEST(NumberRange, SchemaKeywords) {
  const std::string s = R"({"type":"number","minimum":-1.5,"exclusiveMaximum":2.25})";
  EXPECT_TRUE(accepts(s, "-1.5"));
  EXPECT_TRUE(accepts(s, "2.2499"));
  EXPECT_TRUE(accepts(s, "225e-2") == false);
  EXPECT_FALSE(accepts(s, "-1.50001"));
  EXPECT_TRUE(accepts(s, "0"));
  // Inside an object, a value the model must finish.
  const std::string o = R"({"type":"object","properties":{"p":{"type":"number","minimum":0.5,
      "maximum":0.5}},"required":["p"],"additionalProperties":false})";
  EXPECT_TRUE(accepts(o, R"({"p":0.5})"));
  EXPECT_TRUE(accepts(o, R"({"p":5e-1})"));
  EXPECT_FALSE(accepts(o, R"({"p":0.6})"));
  // The tighter of minimum and exclusiveMinimum; exclusive on a tie.
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":1,"exclusiveMinimum":1})", "1"));
  EXPECT_TRUE(accepts(R"({"type":"number","minimum":1,"exclusiveMinimum":0})", "1"));
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":2,"exclusiveMinimum":1})", "1.5"));
  // Without a type: numbers are bounded, other types are not.
  EXPECT_TRUE(accepts(R"({"maximum":3})", R"("x")"));
  EXPECT_FALSE(accepts(R"({"maximum":3})", "3.5"));
  // Integers: exclusive bounds and fractional bounds step inside.
  const std::string i = R"({"type":"integer","exclusiveMinimum":-2,"maximum":3.7})";
  EXPECT_FALSE(accepts(i, "-2"));
  EXPECT_TRUE(accepts(i, "-1"));
  EXPECT_TRUE(accepts(i, "3"));
  EXPECT_FALSE(accepts(i, "4"));
  EXPECT_TRUE(accepts(R"({"type":"integer","minimum":-2.5})", "-2"));
  EXPECT_FALSE(accepts(R"({"type":"integer","minimum":-2.5})", "-3"));
  // Merged beside anyOf: the tighter bound, exactly.
  const std::string m = R"({"type":"number","maximum":0.3,"anyOf":[{"maximum":0.30000000001}]})";
  EXPECT_TRUE(accepts(m, "0.3"));
  EXPECT_FALSE(accepts(m, "0.300000000001"));
  // Errors name the keyword.
  EXPECT_NE(compile_error(R"({"type":"number","minimum":2,"maximum":1})").find("no number lies"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"integer","minimum":1.5,"maximum":1.7})").find("no integer"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"number","exclusiveMinimum":true})").find("draft 4"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"number","maximum":"1"})").find("'maximum' must be a number"),
            std::string::npos);
}

// The cases of the JSON-Schema-Test-Suite (draft 7) for these keywords:
// tests/draft7/minimum.json, maximum.json, exclusiveMinimum.json and
// exclusiveMaximum.json, each group's schema with its data as written there.
TEST(NumberRange, JsonSchemaTestSuiteDraft7) {
  struct Case {
    const char* schema;
    std::vector<std::pair<const char*, bool>> data;
  };
  const std::vector<Case> groups = {
      {R"({"minimum":1.1})", {{"2.6", true}, {"1.1", true}, {"0.6", false}, {R"("x")", true}}},
      {R"({"minimum":-2})",
       {{"-1", true},
        {"0", true},
        {"-2", true},
        {"-2.0", true},
        {"-2.0001", false},
        {"-3", false},
        {R"("x")", true}}},
      {R"({"maximum":3.0})", {{"2.6", true}, {"3.0", true}, {"3.5", false}, {R"("x")", true}}},
      {R"({"maximum":300})", {{"299.97", true}, {"300", true}, {"300.00", true}, {"300.5", false}}},
      {R"({"exclusiveMinimum":1.1})",
       {{"1.2", true}, {"1.1", false}, {"0.6", false}, {R"("x")", true}}},
      {R"({"exclusiveMinimum":-2})",
       {{"-1", true},
        {"0", true},
        {"-2", false},
        {"-2.0", false},
        {"-2.0001", false},
        {"-3", false},
        {R"("x")", true}}},
      {R"({"exclusiveMinimum":0})",
       {{"0.1", true},
        {"1", true},
        {"0", false},
        {"0.0", false},
        {"-1", false},
        {"-0.001", false}}},
      {R"({"exclusiveMaximum":3.0})",
       {{"2.2", true}, {"3.0", false}, {"3.5", false}, {R"("x")", true}}},
      {R"({"exclusiveMaximum":-1})",
       {{"-2", true},
        {"-1", false},
        {"-1.0", false},
        {"-0.9999", false},
        {"0", false},
        {R"("x")", true}}},
      {R"({"exclusiveMaximum":0})",
       {{"-0.1", true},
        {"-1", true},
        {"0", false},
        {"0.0", false},
        {"1", false},
        {"0.001", false}}},
  };
  int checked = 0;
  for (const Case& g : groups) {
    ASSERT_EQ(compile_error(g.schema), "") << g.schema;
    for (const auto& [data, valid] : g.data) {
      EXPECT_EQ(accepts(g.schema, data), valid) << g.schema << " " << data;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 52);
}

}  // namespace
}  // namespace k3::grammar
