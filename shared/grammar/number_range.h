// JSON numbers within decimal bounds (JSON Schema minimum, maximum,
// exclusiveMinimum, exclusiveMaximum on "type": "number"), compared as exact
// decimals: 0.1000000000000000055 is above a bound 0.1, 1e2 equals 100, -0
// equals 0. The number is read one symbol at a time with a NumberCursor (a
// fixed-size summary, not the digits: how the significant digits compare with
// each bound's, the decimal exponent so far, the digit counts), so the matcher
// keeps it in a Frame.
//
// Every symbol taken leaves a completion in range (no dead ends): rest() is
// the exact fewest symbols that finish the number in range, and step() refuses
// a symbol after which there is none. The numbers read are those of the
// matcher's unbounded numbers: JSON syntax with at most kMaxMantissaDigits
// digits before and after the point and kMaxExponentDigits exponent digits.
//
// A bound is the decimal text of the schema's value: integers exactly as
// written; other numbers as nlohmann::json keeps them, a double, written back
// as the shortest decimal that reads as that double (the value written in the
// schema whenever it has at most 17 significant digits).
//
// Immutable after make(); thread-safe to share.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::grammar {

// Where the reading of a JSON number stands, after the symbols so far: the
// phases of the matcher's numbers and of NumberRange's cursor alike.
enum NumberPhase : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,  // "0" or "-0": the integer part is complete
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumE,
  kNumESign,
  kNumExp,
};

inline constexpr int kMaxMantissaDigits = 20;  // before and after the point, each
inline constexpr int kMaxExponentDigits = 2;   // every number finite

// ±0.digits × 10^exp; digits without leading or trailing zeros, "" for zero.
struct Decimal {
  bool neg = false;
  std::string digits;
  int32_t exp = 0;
  bool zero() const { return digits.empty(); }
};

// The exact value of a JSON number's text (InvalidArgument when it is not
// one, or its exponent is beyond ±10^9).
StatusOr<Decimal> parse_decimal(std::string_view json_number);
// -1, 0, 1 as a <, ==, > b.
int compare_decimals(const Decimal& a, const Decimal& b);

// Where a number is (all bytes fields, zero at the start, so equal cursors
// have equal bytes).
struct NumberCursor {
  int16_t p = 0;      // value so far = 0.D × 10^p; D empty: -(zeros after the point)
  uint8_t phase = 0;  // kNum* of number_range.cpp (0: nothing read)
  uint8_t neg = 0;    // after '-'
  uint8_t int_digits = 0;
  uint8_t frac_digits = 0;
  uint8_t sig = 0;  // |D|: significant digits so far
  uint8_t cmp[2] = {
      0, 0};  // D against the lower, upper bound's digits: 0 equal so far, 1 below, 2 above
  uint8_t exp_neg = 0;
  uint8_t exp_digits = 0;
  uint8_t exp_value = 0;
  uint8_t spare[4] = {0, 0, 0, 0};
  bool operator==(const NumberCursor&) const = default;
};
static_assert(sizeof(NumberCursor) == 16);

class NumberRange {
 public:
  struct Bound {
    bool present = false;
    bool open = false;  // exclusive
    Decimal value;
  };

  // InvalidArgument (naming `path`) when no number lies within.
  static StatusOr<NumberRange> make(Bound lo, Bound hi, const std::string& path);

  // Takes `sym` (a byte); false (cursor unspecified) when it is not a number's
  // next symbol or no number in range could follow.
  bool step(NumberCursor* c, int sym) const;
  // Whether the number read so far is complete and in range.
  bool can_end(const NumberCursor& c) const;
  // The fewest symbols that complete a number in range (kInfinite: none).
  int64_t rest(const NumberCursor& c) const;

  const Bound& lo() const { return b_[0]; }
  const Bound& hi() const { return b_[1]; }

 private:
  struct Magnitude;  // the bounds on |value| for one sign
  bool contains(const NumberCursor& c, int32_t exponent) const;
  int64_t rest_mantissa(const NumberCursor& c, bool neg) const;
  int64_t rest_exponent(const NumberCursor& c) const;
  int8_t need(int sign, bool need_a, bool need_b, bool first, int k) const;
  void fill_need_tables();

  std::array<Bound, 2> b_;
  // need_[sign][need_a][need_b][k]: the fewest significant digits to append
  // after k of them, equal so far to the digits of the magnitude bounds A
  // (need_a) and B (need_b) of this sign, so that the digits end >= A's
  // (> when A is exclusive) and <= B's; -1: none. k = kFirst: no digit yet
  // (the first is not 0).
  static constexpr int kPositions = 2 * kMaxMantissaDigits + 2;
  static constexpr int kFirst = kPositions;
  std::vector<int8_t> need_;
};

}  // namespace k3::grammar
