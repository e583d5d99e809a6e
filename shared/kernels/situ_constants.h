// The constants of SiTU's defined arithmetic (activations.h), shared by its
// variants: plain constants, no code.
#pragma once

#include <cstdint>

namespace k3::kernels::situ_constants {

constexpr double kLog2e = 1.4426950408889634074;
// ln 2 in two parts (fdlibm's): n * kLn2Hi is exact for |n| < 2^20.
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
// 1.5 * 2^52: x + kRound - kRound rounds x to an integer (nearest even), and
// the low bits of x + kRound hold it.
constexpr double kRound = 6755399441055744.0;
constexpr uint64_t kRoundBits = 0x4338000000000000ull;
constexpr double kExpMax = 700.0;      // exp's argument is clamped to +-this
constexpr double kTanhMax = 20.0;      // tanh(20) is 1 in double
constexpr double kTanhTiny = 0x1p-20;  // below it tanh(y) = y
// 1 / k!, k = 0 .. 11 (Horner from k = 11 down).
constexpr double kInvFact[12] = {
    1.0,         1.0,          1.0 / 2.0,     1.0 / 6.0,      1.0 / 24.0,      1.0 / 120.0,
    1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362880.0, 1.0 / 3628800.0, 1.0 / 39916800.0};

}  // namespace k3::kernels::situ_constants
