"""What a generated C++ module starts with: headers, then the helpers its kernels call by name
(cpp.py keeps only those): NaN-propagating max/min (and their OpenMP reductions), Python's and
C's remainders, the sign bit, fast float32 sin/cos, half-precision conversions.
"""

import re

from minicompiler.codegen import cpp_bessel, cpp_special, orthogonal_polynomials

HEADERS = r"""
// -fno-finite-math-only (for correct NaN/inf) makes GCC drop __FAST_MATH__, which glibc reads
// to declare the SIMD versions (libmvec) of cos, exp, ...: define it so those loops vectorize.
#ifndef __FAST_MATH__
#define __FAST_MATH__ 1
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
"""

# Helpers are separated by blank lines; DEFINITION finds the names each one defines.
DEFINITION = re.compile(r"(?:inline [\w*]+ |#define |declare reduction\()(\w+)")
HELPERS = r"""
// torch.maximum/minimum propagate NaN; std::fmax does not.
template <typename T> inline T max_propagate_nan(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> inline T min_propagate_nan(T a, T b) { return (a < b || a != a) ? a : b; }
// ... and as OpenMP reductions, so `omp simd` may vectorize amax/amin loops too
#define REDUCTION_TYPES float, double, int64_t, int32_t, int16_t, int8_t, uint8_t, bool
#pragma omp declare reduction(max_propagate_nan : REDUCTION_TYPES : \
    omp_out = max_propagate_nan(omp_out, omp_in)) initializer(omp_priv = omp_orig)
#pragma omp declare reduction(min_propagate_nan : REDUCTION_TYPES : \
    omp_out = min_propagate_nan(omp_out, omp_in)) initializer(omp_priv = omp_orig)

// argmax/argmin's step in a sweep that visits its row in order (`at` is -1 before the first
// element): move to `position` if its value is larger (smaller) than the best so far, or is the
// first NaN (torch counts NaN beyond every number); of equal values the earlier position stays.
template <typename T> inline void argmax_step(T& best, int64_t& at, T value, int64_t position) {
    if (at < 0 || value > best || (value != value && best == best)) { best = value; at = position; }
}
template <typename T> inline void argmin_step(T& best, int64_t& at, T value, int64_t position) {
    if (at < 0 || value < best || (value != value && best == best)) { best = value; at = position; }
}

// cummax's (cummin's) position, as torch's: of equal values the last, and the last NaN once one is met
template <typename T> inline void cummax_step(T& best, int64_t& at, T value, int64_t position) {
    if (at < 0 || value != value || (best == best && value >= best)) { best = value; at = position; }
}
template <typename T> inline void cummin_step(T& best, int64_t& at, T value, int64_t position) {
    if (at < 0 || value != value || (best == best && value <= best)) { best = value; at = position; }
}

// logcumsumexp's step, log(e^a + e^b) as torch's: the larger plus log1p(e^(smaller - larger)),
// which cannot overflow; two equal infinities stay what they are (inf - inf would be NaN)
template <typename T> inline T log_add_exp(T a, T b) {
    T high = max_propagate_nan(a, b), low = min_propagate_nan(a, b);
    if (low == high && !std::isfinite(low)) return a;
    return std::log1p(std::exp(low - high)) + high;
}

template <typename T> inline T sign(T x) { return static_cast<T>((T(0) < x) - (x < T(0))); }

// A reduction kernel's row cache: room for n values of T in a per-thread buffer kept between
// rows and calls (bytes, so that bool gets a plain array; std::vector<bool> packs bits).
template <typename T> inline T* row_cache(std::vector<unsigned char>& bytes, int64_t n) {
    bytes.resize(n * sizeof(T));
    return reinterpret_cast<T*>(bytes.data());
}

// Python's %: the result has the sign of the divisor (C's fmod and % follow the dividend).
template <typename T> inline T python_remainder(T a, T b) {
    T m;
    if constexpr (std::is_floating_point_v<T>) m = std::fmod(a, b); else m = a % b;
    return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}

// torch.fmod: C's remainder, for integers too (std::fmod would compute them in double)
template <typename T> inline T c_fmod(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b); else return a % b;
}

// -x as a flip of the sign bit: under -ffast-math (no signed zeros) GCC may rewrite -(c ? x : 0.0)
// as c ? -x : 0.0, which is +0.0 where eager gives -0.0 (-tril(x), then signbit or 1/x)
template <typename T> inline T negate(T x) {
    if constexpr (std::is_same_v<T, float>) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof(bits));
        bits ^= 0x80000000u;
        std::memcpy(&x, &bits, sizeof(bits));
        return x;
    } else if constexpr (std::is_same_v<T, double>) {
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof(bits));
        bits ^= 0x8000000000000000ull;
        std::memcpy(&x, &bits, sizeof(bits));
        return x;
    } else {
        return -x;
    }
}

// torch.signbit: read the bit itself; under -ffast-math (no signed zeros) std::signbit may
// compile to x < 0, which is false for -0.0
template <typename T> inline bool sign_bit(T x) {
    if constexpr (std::is_same_v<T, float>) {
        uint32_t bits;
        std::memcpy(&bits, &x, sizeof(bits));
        return bits >> 31;
    } else if constexpr (std::is_same_v<T, double>) {
        uint64_t bits;
        std::memcpy(&bits, &x, sizeof(bits));
        return bits >> 63;
    } else if constexpr (std::is_signed_v<T>) {
        return x < 0;
    } else {
        return false;
    }
}

// float32 sin and cos that vectorize into a few FMAs (as SLEEF's 3.5-ulp "u35" functions do):
// subtract the nearest multiple q of pi (for cos: the nearest odd multiple of pi/2) and take an
// odd polynomial of the rest r, |r| <= pi/2. pi is split into three floats so that each q * part
// is exact: r is exact for |x| <= FAST_TRIG_LIMIT. Kernels check each argument and compute a
// block again with std::sin/std::cos where one is larger (or NaN, or inf).
#define FAST_TRIG_LIMIT 125.0f
inline float sin_polynomial(float r) {  // sin(r) for |r| <= pi/2, in Estrin form (short chains)
    float s = r * r, s2 = s * s;
    float low = std::fma(0.00833307858556509017944336f, s, -0.166666597127914428710938f);
    float high = std::fma(2.6083159809786593541503e-06f, s, -0.0001981069071916863322258f);
    return std::fma(s, std::fma(high, s2, low) * r, r);
}
inline float fast_sin(float x) {  // q nearest x / pi: sin(x) = (-1)^q sin(x - q pi)
    float q = std::nearbyint(x * 0.318309886183790671538f);
    float r = std::fma(q, -3.1414794921875f, x);
    r = std::fma(q, -0.00011315941810607910156f, r);
    r = std::fma(q, -1.9841872589410058936e-09f, r);
    return sin_polynomial((static_cast<int>(q) & 1) ? -r : r);
}
inline float fast_cos(float x) {  // q odd nearest x / (pi/2): cos(x) = -(-1)^((q-1)/2) sin(x - q pi/2)
    float q = 1.0f + 2.0f * std::nearbyint(x * 0.318309886183790671538f - 0.5f);
    float r = std::fma(q, -1.57073974609375f, x);
    r = std::fma(q, -5.657970905303955078e-05f, r);
    r = std::fma(q, -9.920936294705029468e-10f, r);
    return sin_polynomial((static_cast<int>(q) & 2) ? r : -r);
}
// Arguments known to lie in [-1, 1] (results of sin or cos) need no reduction at all:
inline float sin_of_unit(float x) { return sin_polynomial(x); }
inline float cos_of_unit(float x) {  // cos(x) = sin(pi/2 - |x|), pi/2 in two parts
    return sin_polynomial((1.57079637050628662109375f - std::abs(x)) - 4.37113900018624283e-8f);
}

// bfloat16 is the top half of a float32: widen by shifting, narrow by rounding to nearest even.
inline float bf16_to_float(uint16_t bits) {
    uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
}
inline uint16_t float_to_bf16(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    if (value != value) return 0x7fc0;
    bits += 0x7fff + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}
"""

# The special functions (lgamma's family, erfinv, Bessel I0/I1, ...) come last: they may call the
# helpers above (sign_bit); then the Bessel J, Y, K and Airy functions, which call theirs, and the
# orthogonal polynomials
HELPERS = HELPERS.rstrip() + "\n\n" + cpp_special.HELPERS.strip() + "\n"
HELPERS += "\n" + cpp_bessel.HELPERS.strip() + "\n\n" + orthogonal_polynomials.CPP_HELPERS.strip() + "\n"
