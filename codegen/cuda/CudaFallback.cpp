//===- CudaFallback.cpp - generated stand-ins for library launches --------===//
//
// See CudaFallback.h. The GEMM is the classic shared-memory tiling: a block
// of 256 threads owns a 64x64 tile of one C matrix; for each step of 16
// along K it stages the 64x16 slice of A and the 16x64 slice of B in shared
// memory (zero past the edges), then each thread folds them into its 4x4
// outputs (rows tm + 16r, columns tn + 16c: neighbouring threads read
// neighbouring words of B's slice). The conv is the direct loop nest, a
// thread per output, skipping the taps that fall in the zero padding.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/CudaFallback.h"
#include "codegen/cuda/CudaEmitter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace kiln;

namespace {
constexpr int64_t kTile = 64;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// " + beta * OLD" in CUDA C, or nothing for beta 0.
std::string keep(const nlohmann::json &beta, const std::string &type,
                 const std::string &old) {
  double b = beta.get<double>();
  if (b == 0)
    return "";
  if (b == 1)
    return " + " + old;
  return llvm::formatv(" + ({0}){1:e17} * {2}", type, b, old).str();
}
} // namespace

CudaFallback kiln::gemmFallback(const nlohmann::json &g) {
  static_assert(kCudaBlockSize == 256, "the tiling assumes 256 threads");
  int64_t batch = g.at("batch"), m = g.at("m"), n = g.at("n"), k = g.at("k");
  bool transA = g.at("trans_a"), transB = g.at("trans_b");
  std::string type = g.at("dtype") == "f64" ? "double" : "float";
  int64_t tilesM = ceilDiv(m, kTile), tilesN = ceilDiv(n, kTile);
  CudaFallback f;
  f.threads = batch * tilesM * tilesN * kCudaBlockSize;
  // Which element of the 64x16 (16x64) slice thread t loads in round j:
  // consecutive threads along the contiguous dim of the matrix in memory.
  auto sliceA = transA ? "const int kk = e >> 6, mm = e & 63;"
                       : "const int mm = e >> 4, kk = e & 15;";
  auto sliceB = transB ? "const int nn = e >> 4, kk = e & 15;"
                       : "const int kk = e >> 6, nn = e & 63;";
  std::string readA = transA ? llvm::formatv("A[gk * {0} + gm]", m).str()
                             : llvm::formatv("A[gm * {0} + gk]", k).str();
  std::string readB = transB ? llvm::formatv("B[gn * {0} + gk]", k).str()
                             : llvm::formatv("B[gk * {0} + gn]", n).str();
  f.text = llvm::formatv(
      R"(    // generated stand-in for the GEMM launch: C[{4}x{5}] = A * B (K {6}){17}
    const int t = (int)(i & 255), tm = t >> 4, tn = t & 15;
    int64_t tile = i >> 8;
    const int64_t n0 = tile % {8} * 64;
    tile /= {8};
    const int64_t m0 = tile % {7} * 64;
    const int64_t b = tile / {7};
    const {0} *A = (const {0} *)s.p[{1}] + b * {9};
    const {0} *B = (const {0} *)s.p[{2}] + b * {10};
    {0} *C = ({0} *)s.p[{3}] + b * {11};
    __shared__ {0} kiln_as[16][64];
    __shared__ {0} kiln_bs[16][64];
    {0} acc[4][4];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        acc[r][c] = 0;
    for (int64_t k0 = 0; k0 < {6}; k0 += 16) {{
      for (int j = 0; j < 4; ++j) {{
        const int e = t + 256 * j;
        {{
          {12}
          const int64_t gm = m0 + mm, gk = k0 + kk;
          kiln_as[kk][mm] = gm < {4} && gk < {6} ? {13} : ({0})0;
        }
        {{
          {14}
          const int64_t gn = n0 + nn, gk = k0 + kk;
          kiln_bs[kk][nn] = gn < {5} && gk < {6} ? {15} : ({0})0;
        }
      }
      __syncthreads();
      for (int kk = 0; kk < 16; ++kk) {{
        {0} a[4], bv[4];
        for (int r = 0; r < 4; ++r)
          a[r] = kiln_as[kk][tm + 16 * r];
        for (int c = 0; c < 4; ++c)
          bv[c] = kiln_bs[kk][tn + 16 * c];
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c)
            acc[r][c] += a[r] * bv[c];
      }
      __syncthreads();
    }
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {{
        const int64_t gm = m0 + tm + 16 * r, gn = n0 + tn + 16 * c;
        if (gm < {4} && gn < {5})
          C[gm * {5} + gn] = acc[r][c]{16};
      }
)",
      type, g.at("a").get<int64_t>(), g.at("b").get<int64_t>(),
      g.at("c").get<int64_t>(), m, n, k, tilesM, tilesN,
      g.at("stride_a").get<int64_t>(), g.at("stride_b").get<int64_t>(),
      g.at("stride_c").get<int64_t>(), sliceA, readA, sliceB, readB,
      keep(g.at("beta"), type, "C[gm * " + std::to_string(n) + " + gn]"),
      keep(g.at("beta"), type, "C"));
  return f;
}

CudaFallback kiln::convFallback(const nlohmann::json &c) {
  auto dims = [&](const char *key) {
    return c.at(key).get<std::vector<int64_t>>();
  };
  std::vector<int64_t> x = dims("x_shape"), w = dims("w_shape"),
                       y = dims("y_shape"), pads = dims("pads"),
                       strides = dims("strides"), dilations = dims("dilations");
  int64_t groups = c.at("groups");
  CudaFallback f;
  f.threads = y[0] * y[1] * y[2] * y[3];
  std::string epilogue;
  if (c.contains("bias"))
    epilogue += llvm::formatv("    acc += ((const float *)s.p[{0}])[m];\n",
                              c.at("bias").get<int64_t>());
  if (c.contains("z"))
    epilogue += llvm::formatv("    acc += ((const float *)s.p[{0}])[i];\n",
                              c.at("z").get<int64_t>());
  if (c.contains("activation"))
    epilogue += "    acc = acc > 0.f ? acc : 0.f;\n";
  f.text = llvm::formatv(
      R"(    // generated stand-in for the conv launch: a thread per output
    const float *x = (const float *)s.p[{0}];
    const float *w = (const float *)s.p[{1}];
    float *y = (float *)s.p[{2}];
    int64_t r = i;
    const int64_t ow = r % {6};
    r /= {6};
    const int64_t oh = r % {5};
    r /= {5};
    const int64_t m = r % {7}, n = r / {7};
    const int64_t g = m / {8};
    float acc = 0.f;
    for (int64_t c = 0; c < {9}; ++c) {{
      const float *xp = x + ((n * {10} + g * {9} + c) * {3}) * {4};
      const float *wp = w + (m * {9} + c) * {11} * {12};
      for (int64_t kh = 0; kh < {11}; ++kh) {{
        const int64_t ih = oh * {13} - {15} + kh * {17};
        if (ih < 0 || ih >= {3})
          continue;
        for (int64_t kw = 0; kw < {12}; ++kw) {{
          const int64_t iw = ow * {14} - {16} + kw * {18};
          if (iw >= 0 && iw < {4})
            acc += xp[ih * {4} + iw] * wp[kh * {12} + kw];
        }
      }
    }
{19}    y[i] = acc{20};
)",
      c.at("x").get<int64_t>(), c.at("w").get<int64_t>(),
      c.at("y").get<int64_t>(), x[2], x[3], y[2], y[3], y[1], y[1] / groups,
      w[1], x[1], w[2], w[3], strides[0], strides[1], pads[0], pads[1],
      dilations[0], dilations[1], epilogue,
      keep(c.at("beta"), "float", "y[i]"));
  return f;
}
