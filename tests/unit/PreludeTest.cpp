//===- PreludeTest.cpp - the generated C++'s prelude, as C++ --------------===//
//
// The helpers every generated kernel file starts with
// (codegen/cpu/prelude/), compiled here as the kernels are (-fopenmp,
// -fno-math-errno, -fno-trapping-math) once per instruction set kiln
// generates code for: the build makes one test binary per -march level
// (KILN_PRELUDE_ISA names it). ctest starts the v3 and v4 binaries only on
// a CPU with that level (run_if_cpu.py: one built for a level the CPU
// lacks may die of SIGILL before main); run by hand, each also skips its
// tests where the CPU lacks the level.
// References are plain loops in double, or libm.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/prelude/Transpose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>

namespace {

// Whether this CPU runs code built for KILN_PRELUDE_ISA.
bool cpuRunsThisBuild(std::string &why) {
  __builtin_cpu_init();
  std::string isa = KILN_PRELUDE_ISA;
  bool ok = true;
  if (isa == "x86-64-v3")
    ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  else if (isa == "x86-64-v4")
    ok = __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
  why = "this CPU lacks " + isa + "'s instructions";
  return ok;
}

class Prelude : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!cpuRunsThisBuild(why))
      GTEST_SKIP() << why;
  }
};

// Distance in units in the last place between two finite floats.
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    int32_t i = __builtin_bit_cast(int32_t, f);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

TEST_F(Prelude, ExpIsWithinTwoUlpsOfLibm) {
  int64_t worst = 0;
  float at = 0;
  // Every 97th float of [-87.3, 88.7] (results normal), both signs.
  for (uint32_t bits = 0; bits < 0x42b10000u; bits += 97)
    for (float x :
         {__builtin_bit_cast(float, bits), -__builtin_bit_cast(float, bits)}) {
      if (x < -87.3f)
        continue;
      float want = float(std::exp(double(x)));
      int64_t d = ulps(kiln_expf(x), want);
      if (d > worst) {
        worst = d;
        at = x;
      }
    }
  EXPECT_LE(worst, 2) << "at x = " << at;
  EXPECT_TRUE(std::isnan(kiln_expf(std::nanf(""))));
  EXPECT_EQ(kiln_expf(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(kiln_expf(-200.0f), 0.0f);
  // Subnormal results, which 2^n in two halves keeps.
  EXPECT_NEAR(kiln_expf(-100.0f), std::exp(-100.0), 1e-45);
}

TEST_F(Prelude, ErfIsWithinSixUlpsOfLibm) {
  int64_t worst = 0;
  float at = 0;
  for (int i = -400000; i <= 400000; ++i) {
    float x = i * 1e-5f; // [-4, 4], 0 included
    float want = float(std::erf(double(x)));
    // Near 0 erf(x) ~ 2x/sqrt(pi): relative error is what ulps measure.
    int64_t d = ulps(kiln_erff(x), want);
    if (d > worst) {
      worst = d;
      at = x;
    }
  }
  // The approximation's own bound is 6 ulps; without FMA (x86-64 below v3)
  // its products round once more and reach 7 (near |x| = 3.95).
#if defined(__FMA__)
  EXPECT_LE(worst, 6) << "at x = " << at;
#else
  EXPECT_LE(worst, 7) << "at x = " << at;
#endif
  EXPECT_EQ(kiln_erff(7.0f), 1.0f);
  EXPECT_EQ(kiln_erff(-7.0f), -1.0f);
  EXPECT_TRUE(std::isnan(kiln_erff(std::nanf(""))));
}

TEST_F(Prelude, TanhIsWithinTwoUlpsOfLibm) {
  int64_t worst = 0;
  float at = 0;
  // Every 31st float up to 10 (tanh is 1 in float from 9.01 on), both signs.
  for (uint32_t bits = 0; bits < 0x41200000u; bits += 31)
    for (float x :
         {__builtin_bit_cast(float, bits), -__builtin_bit_cast(float, bits)}) {
      float want = float(std::tanh(double(x)));
      int64_t d = ulps(kiln_tanhf(x), want);
      if (d > worst) {
        worst = d;
        at = x;
      }
    }
  EXPECT_LE(worst, 2) << "at x = " << at;
  EXPECT_EQ(kiln_tanhf(20.0f), 1.0f);
  EXPECT_EQ(kiln_tanhf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(kiln_tanhf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_TRUE(std::isnan(kiln_tanhf(std::nanf(""))));
  EXPECT_TRUE(std::signbit(kiln_tanhf(-0.0f)));
}

TEST_F(Prelude, MaxAndMinPropagateNaNFromEitherSide) {
  float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(kiln_maximum(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(kiln_maximum(1.0f, nan)));
  EXPECT_TRUE(std::isnan(kiln_minimum(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(kiln_minimum(1.0f, nan)));
  EXPECT_EQ(kiln_maximum(-2.0f, 3.0f), 3.0f);
  EXPECT_EQ(kiln_minimum(-2.0f, 3.0f), -2.0f);
  EXPECT_EQ(kiln_maximum(7, 5), 7);
}

TEST_F(Prelude, ScratchBlocksAreReusedWhenTheyFit) {
  void *first;
  {
    kiln_scratch a(1000);
    first = a.data;
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  // 1024 bytes back in the cache: a request of 600 fits (at most half to
  // spare), one of 300 does not.
  kiln_scratch b(600);
  EXPECT_EQ(b.data, first);
  kiln_scratch c(300);
  EXPECT_NE(c.data, first);
}

std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

// C = A B, A [m, k] and B [k, n] row-major, in double.
std::vector<double> product(const float *a, const float *b, int64_t m,
                            int64_t n, int64_t k) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        c[i * n + j] += double(a[i * k + p]) * b[p * n + j];
  return c;
}

TEST_F(Prelude, PackedPanelsMultiplyAsAPlainProduct) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 16, 8},
                         {3, 17, 5},
                         {8, 49, 64},
                         {13, 100, 33}}) {
    std::vector<float> a = randoms(2 * m * k, 1), b = randoms(k * n, 2);
    // [ceil(n / 16)][k][16], zero past n.
    int64_t panels = (n + 15) / 16;
    std::vector<float> packed(panels * k * 16, 0.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        packed[(j / 16) * k * 16 + p * 16 + j % 16] = b[p * n + j];
    for (bool accumulate : {false, true}) {
      std::vector<float> c(2 * m * n, accumulate ? 0.5f : NAN);
      ASSERT_TRUE(kiln_sgemm_packed(2, m, n, k, a.data(), m * k, packed.data(),
                                    c.data(), accumulate, 64));
      for (int64_t i = 0; i < 2; ++i) {
        std::vector<double> want =
            product(a.data() + i * m * k, b.data(), m, n, k);
        for (int64_t e = 0; e < m * n; ++e)
          ASSERT_NEAR(c[i * m * n + e], want[e] + (accumulate ? 0.5 : 0.0),
                      1e-5 * k)
              << "m " << m << " n " << n << " k " << k << " batch " << i
              << " element " << e;
      }
    }
  }
  // More rows than the panels take: false, nothing written.
  std::vector<float> a(40 * 4, 1.0f), packed(16 * 4, 1.0f), c(40 * 16, 3.0f);
  EXPECT_FALSE(kiln_sgemm_packed(1, 40, 16, 4, a.data(), 0, packed.data(),
                                 c.data(), false, 32));
  EXPECT_EQ(c[0], 3.0f);
}

TEST_F(Prelude, SgemmMatchesAPlainProductWithEachTranspose) {
  const int64_t m = 7, n = 33, k = 12;
  std::vector<float> a = randoms(m * k, 3), b = randoms(k * n, 4);
  std::vector<float> at(k * m), bt(n * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      at[p * m + i] = a[i * k + p];
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j)
      bt[j * k + p] = b[p * n + j];
  std::vector<double> want = product(a.data(), b.data(), m, n, k);
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      std::vector<float> c(m * n, NAN);
      if (!kiln_sgemm(1, transA, transB, m, n, k, transA ? at.data() : a.data(),
                      0, transB ? bt.data() : b.data(), 0, c.data(), false))
        GTEST_SKIP() << "no oneDNN sgemm loads here ($KILN_DNNL, libdnnl); "
                        "kernels then run their own loops";
      for (int64_t e = 0; e < m * n; ++e)
        ASSERT_NEAR(c[e], want[e], 1e-5 * k)
            << "transA " << transA << " transB " << transB << " element " << e;
    }
}

// A grouped conv's GEMMs: 3 images (runs) of 4 groups (the batch), A one
// matrix per group shared by every image, B and C one per image and group.
TEST_F(Prelude, SgemmRunsShareAnOperandAcrossRuns) {
  const int64_t runs = 3, groups = 4, m = 5, n = 19, k = 6;
  std::vector<float> a = randoms(groups * m * k, 5),
                     b = randoms(runs * groups * k * n, 6);
  for (bool accumulate : {false, true}) {
    std::vector<float> c(runs * groups * m * n, 0.5f);
    if (!kiln_sgemm_runs(runs, groups, false, false, m, n, k, a.data(), m * k,
                         0, b.data(), k * n, groups * k * n, c.data(),
                         accumulate))
      GTEST_SKIP() << "no oneDNN sgemm loads here ($KILN_DNNL, libdnnl); "
                      "kernels then run their own loops";
    for (int64_t r = 0; r < runs; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        std::vector<double> want = product(
            a.data() + g * m * k, b.data() + (r * groups + g) * k * n, m, n, k);
        for (int64_t e = 0; e < m * n; ++e)
          ASSERT_NEAR(c[(r * groups + g) * m * n + e],
                      want[e] + (accumulate ? 0.5 : 0.0), 1e-5 * k)
              << "run " << r << " group " << g << " element " << e;
      }
  }
}

// y = init or bias + the 3x3 taps of x padded with `pad`, stride S (conv
// when `w` is given, else max).
template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top,
          int64_t Left>
std::vector<double> window(const std::vector<float> &x, int64_t planes,
                           const float *w, const float *bias, double init,
                           double pad) {
  std::vector<double> y(planes * HO * WO);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < HO; ++oh)
      for (int64_t ow = 0; ow < WO; ++ow) {
        double acc = w && bias ? bias[p] : init;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j) {
            int64_t r = oh * S + i - Top, c = ow * S + j - Left;
            double v = r >= 0 && r < H && c >= 0 && c < W
                           ? x[(p * H + r) * W + c]
                           : pad;
            if (w)
              acc += v * w[(p * 9) + i * 3 + j];
            else
              acc = std::isnan(v) || v > acc ? v : acc;
          }
        y[(p * HO + oh) * WO + ow] = acc;
      }
  return y;
}

template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top,
          int64_t Left>
void checkDepthwise() {
  SCOPED_TRACE("S " + std::to_string(S) + ", " + std::to_string(H) + "x" +
               std::to_string(W) + " to " + std::to_string(HO) + "x" +
               std::to_string(WO));
  const int64_t batch = 2, c = 5;
  std::vector<float> x = randoms(batch * c * H * W, 5), w = randoms(c * 9, 6),
                     bias = randoms(c, 7);
  std::vector<float> y(batch * c * HO * WO, NAN);
  bool done = kiln_dwconv3x3<S, H, W, HO, WO, Top, Left>(
      batch, c, x.data(), w.data(), bias.data(), 0.0f, y.data());
#if !defined(__AVX512F__)
  // Without AVX-512, stride-1 rows of under 8 outputs are left to the
  // window's own loops: false, nothing written.
  if (S == 1 && WO < 8) {
    EXPECT_FALSE(done);
    for (float v : y)
      ASSERT_TRUE(std::isnan(v));
    return;
  }
#endif
  ASSERT_TRUE(done);
  // Per plane (n, ch): its channel's weights and bias.
  std::vector<float> wAll, bAll;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ch = 0; ch < c; ++ch) {
      wAll.insert(wAll.end(), w.begin() + ch * 9, w.begin() + ch * 9 + 9);
      bAll.push_back(bias[ch]);
    }
  std::vector<double> want = window<S, H, W, HO, WO, Top, Left>(
      x, batch * c, wAll.data(), bAll.data(), 0.0, 0.0);
  for (size_t e = 0; e < y.size(); ++e)
    ASSERT_NEAR(y[e], want[e], 1e-5) << "element " << e;
}

TEST_F(Prelude, TransposesOfTheLastTwoDimsMoveEveryElement) {
  for (auto [batch, rows, cols] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
        {2, 5, 3},
        {1, 16, 16},
        {3, 17, 33},
        {2, 128, 64},
        {1, 8, 100}}) {
    std::vector<float> in = randoms(batch * rows * cols, 16),
                       out(in.size(), NAN);
    ASSERT_TRUE(kiln_transpose2d(batch, rows, cols, in.data(), out.data()));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(out[(b * rows + r) * cols + c],
                    in[(b * cols + c) * rows + r])
              << batch << "x" << rows << "x" << cols << " at " << b << ", " << r
              << ", " << c;
  }
}

TEST_F(Prelude, DepthwiseConvsMatchTheirTaps) {
  checkDepthwise<1, 7, 7, 7, 7, 1, 1>();     // flattened with AVX-512
  checkDepthwise<1, 9, 16, 9, 16, 1, 1>();   // flattened with AVX-512
  checkDepthwise<2, 56, 56, 28, 28, 1, 1>(); // rows split into even, odd
  checkDepthwise<1, 28, 28, 28, 28, 1, 1>(); // by rows
  checkDepthwise<2, 14, 14, 7, 7, 1, 1>();
  checkDepthwise<2, 15, 9, 7, 4, 0, 0>(); // odd sizes, no padding
  checkDepthwise<1, 5, 40, 3, 38, 0, 0>();
}

// kiln_conv_flat_tiles on a conv of `groups` groups of c input and mg output
// channels against loops in double, its weight as it is and packed as
// kiln-pack-weights packs it, with an epilogue that must see every (image,
// channel, row) once.
void checkFlatConv(int64_t batch, int64_t groups, int64_t c, int64_t mg,
                   int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t sh,
                   int64_t sw, int64_t top, int64_t left, int64_t bottom,
                   int64_t right) {
  const int64_t m = groups * mg, ci = groups * c, taps = c * kh * kw;
  const int64_t ho = (h + top + bottom - kh) / sh + 1,
                wo = (w + left + right - kw) / sw + 1;
  std::vector<float> x = randoms(batch * ci * h * w, 11),
                     wt = randoms(m * taps, 12);
  std::vector<double> want(batch * m * ho * wo, 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t r = 0; r < ho; ++r)
        for (int64_t q = 0; q < wo; ++q) {
          double sum = 0;
          for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t row = r * sh + i - top, col = q * sw + j - left;
                if (row >= 0 && row < h && col >= 0 && col < w)
                  sum +=
                      double(
                          x[((n * ci + o / mg * c + ch) * h + row) * w + col]) *
                      wt[(o * c + ch) * kh * kw + i * kw + j];
              }
          want[((n * m + o) * ho + r) * wo + q] = sum;
        }
  const int64_t blocks = (mg + 15) / 16;
  std::vector<float> panels(groups * blocks * taps * 16, 0.0f);
  for (int64_t o = 0; o < m; ++o)
    for (int64_t t = 0; t < taps; ++t)
      panels[((o / mg * blocks + o % mg / 16) * taps + t) * 16 + o % mg % 16] =
          wt[o * taps + t];
  const float *none = nullptr;
  for (const float *packed :
       {none, static_cast<const float *>(panels.data())}) {
    std::vector<float> y(want.size(), NAN);
    std::vector<int> seen(want.size(), 0);
    // Threads mark disjoint elements, each its own.
    auto epilogue = [&](int64_t n, int64_t m0, int64_t m1, int64_t r0,
                        int64_t r1) {
      for (int64_t o = m0; o < m1; ++o)
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t q = 0; q < wo; ++q)
            ++seen[((n * m + o) * ho + r) * wo + q];
    };
    bool ran = kiln_conv_flat_tiles(batch, groups, c, m, h, w, top, left, kh,
                                    kw, sh, sw, ho, wo, x.data(), wt.data(),
                                    packed, y.data(), m, ho, epilogue);
    ASSERT_TRUE(ran);
    for (size_t e = 0; e < y.size(); ++e) {
      ASSERT_NEAR(y[e], want[e], 1e-4 * std::sqrt(double(taps)))
          << "element " << e;
      ASSERT_EQ(seen[e], 1) << "element " << e;
    }
  }
}

TEST_F(Prelude, FlatConvsMatchTheirTapsInEveryGroup) {
  checkFlatConv(1, 25, 16, 16, 7, 7, 3, 3, 1, 1, 1, 1, 1,
                1); // regnet_x's last stage
  checkFlatConv(2, 2, 16, 16, 15, 16, 3, 3, 2, 2, 1, 1, 1,
                1); // strided, odd rows
  checkFlatConv(1, 3, 8, 8, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1);  // 8 per group
  checkFlatConv(1, 2, 32, 32, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1); // two vectors
  checkFlatConv(1, 2, 5, 20, 8, 9, 3, 5, 1, 2, 0, 2, 1,
                1); // uneven window and pads
  checkFlatConv(3, 4, 2, 3, 6, 5, 1, 1, 2, 1, 0, 0, 0, 0); // 1x1, 3 per group
  checkFlatConv(1, 2, 4, 40, 4, 30, 2, 3, 2, 2, 0, 0, 1, 0);
  // Rows of more than 16 columns (the copy's loops rather than one vector
  // a row), at strides 1 and 2, pads past the window on the left.
  checkFlatConv(1, 2, 3, 8, 5, 37, 3, 3, 1, 1, 1, 2, 1, 2);
  checkFlatConv(1, 2, 3, 8, 6, 41, 3, 3, 2, 2, 1, 2, 0,
                1); // wide rows, 40 per group
}

// kiln_dwconv_tiles against loops in double, with a bias or an init, and
// an epilogue that must see every (image, channel) plane once.
void checkDepthwiseWindow(int64_t batch, int64_t c, int64_t h, int64_t w,
                          int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                          int64_t top, int64_t left, int64_t bottom,
                          int64_t right) {
  const int64_t ho = (h + top + bottom - kh) / sh + 1,
                wo = (w + left + right - kw) / sw + 1;
  std::vector<float> x = randoms(batch * c * h * w, 13),
                     wt = randoms(c * kh * kw, 14), bias = randoms(c, 15);
  const float *none = nullptr;
  for (const float *b : {none, static_cast<const float *>(bias.data())}) {
    const float init = 0.25f;
    std::vector<double> want(batch * c * ho * wo);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t r = 0; r < ho; ++r)
          for (int64_t q = 0; q < wo; ++q) {
            double sum = b ? b[ch] : init;
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t row = r * sh + i - top, col = q * sw + j - left;
                if (row >= 0 && row < h && col >= 0 && col < w)
                  sum += double(x[((n * c + ch) * h + row) * w + col]) *
                         wt[(ch * kh + i) * kw + j];
              }
            want[((n * c + ch) * ho + r) * wo + q] = sum;
          }
    std::vector<float> y(want.size(), NAN);
    std::vector<int> seen(batch * c, 0);
    // Threads mark disjoint planes, each its own.
    auto epilogue = [&](int64_t n, int64_t c0, int64_t c1, int64_t r0,
                        int64_t r1) {
      if (r0 == 0 && r1 == ho)
        for (int64_t ch = c0; ch < c1; ++ch)
          ++seen[n * c + ch];
    };
    bool ran = kiln_dwconv_tiles(batch, c, h, w, top, left, kh, kw, sh, sw, ho,
                                 wo, x.data(), wt.data(), b, init, y.data(), c,
                                 ho, epilogue);
    ASSERT_TRUE(ran);
    for (size_t e = 0; e < y.size(); ++e)
      ASSERT_NEAR(y[e], want[e], 1e-5 * kh * kw) << "element " << e;
    for (int64_t p = 0; p < batch * c; ++p)
      ASSERT_EQ(seen[p], 1) << "plane " << p;
  }
}

TEST_F(Prelude, DepthwiseWindowsMatchTheirTaps) {
  checkDepthwiseWindow(1, 5, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2); // efficientnet's
  checkDepthwiseWindow(2, 3, 15, 16, 5, 5, 2, 2, 2, 2, 2, 2); // strided, odd
  checkDepthwiseWindow(1, 4, 7, 7, 7, 7, 1, 1, 3, 3, 3, 3);   // convnext's
  checkDepthwiseWindow(1, 2, 40, 33, 3, 3, 1, 1, 1, 1, 1, 1); // long rows
  checkDepthwiseWindow(3, 2, 9, 12, 3, 5, 2, 1, 0, 2, 1,
                       0); // uneven window, pads, strides
  checkDepthwiseWindow(1, 3, 6, 5, 1, 1, 1, 1, 0, 0, 0, 0); // 1x1
  // Channels past one vector and a part of one (16 + 4, 8 + 8 + 4), and
  // more than 8 outputs a row (spans of 7 and 6 at 20 columns).
  checkDepthwiseWindow(2, 20, 11, 20, 5, 5, 1, 1, 2, 2, 2, 2);
  checkDepthwiseWindow(1, 37, 14, 14, 5, 5, 2, 2, 2, 2, 2, 2);
  // Rows and columns of the input past what the windows read.
  checkDepthwiseWindow(1, 17, 16, 17, 3, 3, 2, 2, 0, 0, 0, 0);
  // Pads wider than the window (outputs that read only zeros).
  checkDepthwiseWindow(1, 9, 4, 5, 3, 3, 1, 1, 3, 4, 3, 4);
}

template <int64_t S, int64_t H, int64_t W, int64_t HO, int64_t WO, int64_t Top,
          int64_t Left>
void checkMaxPool(bool withNaN) {
  const int64_t planes = 3;
  std::vector<float> x = randoms(planes * H * W, 8);
  if (withNaN)
    x[H * W + W + 1] = NAN; // plane 1, row 1, column 1
  float pad = -std::numeric_limits<float>::infinity();
  std::vector<float> y(planes * HO * WO, 7.0f);
  ASSERT_TRUE((kiln_maxpool3x3<S, H, W, HO, WO, Top, Left>(
      1, planes, x.data(), pad, pad, y.data())));
  std::vector<double> want =
      window<S, H, W, HO, WO, Top, Left>(x, planes, nullptr, nullptr, pad, pad);
  for (size_t e = 0; e < y.size(); ++e) {
    if (std::isnan(want[e])) {
      ASSERT_TRUE(std::isnan(y[e])) << "element " << e;
      continue;
    }
    ASSERT_EQ(y[e], float(want[e]))
        << "S " << S << " " << H << "x" << W << " element " << e;
  }
}

TEST_F(Prelude, MaxPoolsMatchTheirTapsAndKeepNaN) {
  checkMaxPool<2, 112, 112, 56, 56, 1, 1>(false); // resnet18's
  checkMaxPool<2, 112, 112, 56, 56, 1, 1>(true);
  checkMaxPool<1, 9, 11, 9, 11, 1, 1>(true);
  checkMaxPool<2, 13, 13, 6, 6, 0, 0>(false);
}

} // namespace
