//===- Spectral.cpp - DFT, STFT, Det --------------------------------------===//
//
// The DFT along an axis of length L is two small matmuls with constant
// cosine and sine matrices (O(L n) per line; no FFT), in f64 as numpy.fft
// computes it (an f32 sum leaves 1e-7 where the result is 0). With theta = 2 pi
// j k / n, x = xr + i xi (the last dim: [real] or [real, imag]):
//   forward:  Y[k] = sum_j x[j] e^{-i theta}, k < n (n/2 + 1 if onesided)
//   inverse:  y[k] = 1/n sum_j x[j] e^{+i theta}, k < n
//   inverse onesided (irfft): y[k] = 1/n sum_{j <= n/2} w_j Re(x[j]
//             e^{+i theta}), w_j = 2 except 1 at j = 0 and j = n/2; real
// n is dft_length (default L, or 2 (L - 1) for irfft); the input is
// truncated to n (n/2 + 1 for irfft) entries or zero-padded (the missing
// entries are left out of the sums). dft_length must be a constant; an
// axis read at run time works when every axis gives the result the same
// shape: each candidate is computed and the axis value picks one.
//
// STFT(signal [B, T, 1|2], frame_step, window, frame_length, onesided = 1):
// frames f < 1 + (T - n) / step of n samples (a Gather at f * step + j),
// times the window, then the forward DFT of length n along the frame axis:
// [B, frames, bins, 2].
//
// Det(x [..., n, n]): Leibniz's sum over the n! permutations of signed
// products of n elements (each a [..., 1, 1] slice), for n <= 5; the last
// two dims are then summed away.
//
//===----------------------------------------------------------------------===//

#include "frontend/OpChain.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

enum class Kind { Forward, Inverse, InverseOnesided };

// The DFT of x ([..., L (axis), ..., 1|2]) along `axis`, n points, K
// outputs; result [..., K, ..., 2] (or 1 for irfft) in x's type.
Value dft(NodeContext &c, OpChain &g, Value x, int64_t axis, int64_t n,
          int64_t outputs, Kind kind) {
  auto type = typeOf(x);
  int64_t rank = type.getRank(), length = type.getDimSize(axis);
  Type element = type.getElementType();
  Type compute = c.builder.getF64Type();
  x = g.cast(x, compute);
  bool complex = type.getShape().back() == 2;
  int64_t used = std::min(
      length, kind == Kind::InverseOnesided ? n / 2 + 1 : n); // input entries
  Value xr = g.sliceLast(x, 0, 1);
  Value xi = complex ? g.sliceLast(x, 1, 1) : Value();
  if (used < length) {
    xr = g.slice(xr, axis, 0, used);
    if (xi)
      xi = g.slice(xi, axis, 0, used);
  }
  // The axis last: [..., 1, used].
  SmallVector<int64_t> perm, inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    inverse[perm[d]] = d;
  xr = g.transpose(xr, perm);
  if (xi)
    xi = g.transpose(xi, perm);
  // cos and sin matrices [used, outputs], scaled for the inverses.
  double scale = kind == Kind::Forward ? 1.0 : 1.0 / n;
  std::vector<double> cosines, sines;
  for (int64_t j = 0; j < used; ++j)
    for (int64_t k = 0; k < outputs; ++k) {
      double theta = 2 * M_PI * double((j * k) % n) / n;
      double w = scale;
      if (kind == Kind::InverseOnesided && j != 0 &&
          !(n % 2 == 0 && j == n / 2))
        w *= 2;
      cosines.push_back(w * std::cos(theta));
      sines.push_back(w * std::sin(theta));
    }
  auto matrix = [&](const std::vector<double> &values, StringRef what) {
    std::vector<char> bytes;
    for (double v : values) {
      if (compute.isF64()) {
        const char *p = reinterpret_cast<const char *>(&v);
        bytes.insert(bytes.end(), p, p + sizeof(double));
      } else {
        float f = v;
        const char *p = reinterpret_cast<const char *>(&f);
        bytes.insert(bytes.end(), p, p + sizeof(float));
      }
    }
    return g.constant({used, outputs}, compute, bytes, what);
  };
  Value cosM = matrix(cosines, "dft_cos"), sinM = matrix(sines, "dft_sin");
  // forward: yr = xr cos + xi sin, yi = xi cos - xr sin
  // inverse: yr = xr cos - xi sin, yi = xi cos + xr sin
  double sign = kind == Kind::Forward ? 1 : -1;
  Value yr = g.matmul(xr, cosM);
  if (xi)
    yr = sign > 0 ? g.add(yr, g.matmul(xi, sinM))
                  : g.sub(yr, g.matmul(xi, sinM));
  Value out;
  if (kind == Kind::InverseOnesided) {
    out = g.transpose(yr, inverse);
  } else {
    Value yi = sign > 0 ? g.sub(g.scalar(compute, 0), g.matmul(xr, sinM))
                        : g.matmul(xr, sinM);
    if (xi)
      yi = g.add(yi, g.matmul(xi, cosM));
    out = g.concat({g.transpose(yr, inverse), g.transpose(yi, inverse)},
                   rank - 1);
  }
  return g.cast(out, element);
}

} // namespace

FailureOr<Values> convertDFT(NodeContext &c) {
  if (failed(arity(c, 1, 3)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  if (!type.hasStaticShape() || rank < 2 ||
      (type.getShape().back() != 1 && type.getShape().back() != 2) ||
      !isa<FloatType>(type.getElementType()))
    return c.error("DFT needs a floating-point input of static shape ending "
                   "in 1 (real) or 2 (complex)");
  bool inverse = c.getInt("inverse", 0) != 0,
       onesided = c.getInt("onesided", 0) != 0;
  Kind kind = !inverse   ? Kind::Forward
              : onesided ? Kind::InverseOnesided
                         : Kind::Inverse;
  std::optional<int64_t> fixedLength;
  if (c.inputs.size() > 1 && c.inputs[1]) {
    fixedLength = constantScalar(c.inputs[1]);
    if (!fixedLength)
      return c.error("DFT needs a constant dft_length");
  }
  // n and the result's shape along `axis`.
  auto plan = [&](int64_t axis) {
    int64_t length = type.getDimSize(axis);
    int64_t n = fixedLength                     ? *fixedLength
                : kind == Kind::InverseOnesided ? 2 * (length - 1)
                                                : length;
    int64_t outputs = kind == Kind::Forward && onesided ? n / 2 + 1 : n;
    return std::make_pair(n, outputs);
  };
  OpChain g(c);
  auto along = [&](int64_t axis) -> Value {
    auto [n, outputs] = plan(axis);
    if (n < 1) {
      (void)c.error("DFT length " + Twine(n) + " is not positive");
      return {};
    }
    return dft(c, g, x, axis, n, outputs, kind);
  };
  Value axisValue =
      c.opset >= 20 && c.inputs.size() > 2 ? c.inputs[2] : Value();
  std::optional<int64_t> axis =
      axisValue
          ? constantScalar(axisValue)
          : std::optional<int64_t>(c.opset >= 20 ? -2 : c.getInt("axis", 1));
  if (axis) {
    auto normalized = normalizeAxis(c, *axis, rank);
    if (failed(normalized))
      return failure();
    if (*normalized == rank - 1)
      return c.error("DFT's axis cannot be the last (real, imaginary) dim");
    Value y = along(*normalized);
    if (!y || g.failed())
      return failure();
    return Values{y};
  }
  // A run-time axis: every candidate must give one result shape.
  SmallVector<int64_t> shape;
  for (int64_t a = 0; a < rank - 1; ++a) {
    SmallVector<int64_t> s(type.getShape());
    s[a] = plan(a).second;
    if (!shape.empty() && s != shape)
      return c.error("DFT with an axis read at run time needs every axis to "
                     "give the result the same shape; make the axis a "
                     "constant");
    shape = s;
  }
  Value picked = g.reshape(g.cast(axisValue, c.builder.getI64Type()), {});
  Value y = along(rank - 2);
  for (int64_t a = rank - 3; a >= 0 && y; --a) {
    Value hit = g.op<OrOp>(
        {g.op<EqualOp>({picked, g.i64Constant({}, {a}, "axis")}),
         g.op<EqualOp>({picked, g.i64Constant({}, {a - rank}, "axis")})});
    y = g.where(hit, along(a), y);
  }
  if (!y || g.failed())
    return failure();
  return Values{y};
}

FailureOr<Values> convertSTFT(NodeContext &c) {
  if (failed(arity(c, 2, 4)))
    return failure();
  Value x = c.inputs[0];
  Value window = c.inputs.size() > 2 ? c.inputs[2] : Value();
  auto type = typeOf(x);
  if (!type.hasStaticShape() || type.getRank() != 3 ||
      (type.getShape().back() != 1 && type.getShape().back() != 2))
    return c.error("STFT needs a signal [batch, length, 1|2] of static shape");
  auto step = constantScalar(c.inputs[1]);
  if (!step || *step < 1)
    return c.error("STFT needs a constant positive frame_step");
  int64_t length = type.getDimSize(1), n = length;
  if (window) {
    if (typeOf(window).getRank() != 1 || !typeOf(window).hasStaticShape())
      return c.error("STFT needs a 1-D window of static length");
    n = typeOf(window).getDimSize(0);
  }
  if (c.inputs.size() > 3 && c.inputs[3]) {
    auto given = constantScalar(c.inputs[3]);
    if (!given)
      return c.error("STFT needs a constant frame_length");
    n = *given;
  }
  if (n < 1 || n > length)
    return c.error("STFT frame length " + Twine(n) +
                   " does not fit the signal of length " + Twine(length));
  int64_t frames = 1 + (length - n) / *step;
  OpChain g(c);
  std::vector<int64_t> at;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t j = 0; j < n; ++j)
      at.push_back(f * *step + j);
  Value framed = g.op<GatherOp>(
      {x, g.i64Constant({frames, n}, at, "frames")},
      {c.builder.getNamedAttr("axis", c.builder.getI64IntegerAttr(1))});
  if (window)
    framed = g.mul(framed, g.reshape(window, {n, 1}));
  bool onesided = c.getInt("onesided", 1) != 0;
  Value y = dft(c, g, framed, 2, n, onesided ? n / 2 + 1 : n, Kind::Forward);
  if (g.failed())
    return failure();
  return Values{y};
}

FailureOr<Values> convertDet(NodeContext &c) {
  if (failed(arity(c, 1, 1)))
    return failure();
  Value x = c.inputs[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  if (rank < 2 || type.isDynamicDim(rank - 1) || type.isDynamicDim(rank - 2) ||
      type.getDimSize(rank - 1) != type.getDimSize(rank - 2) ||
      !isa<FloatType>(type.getElementType()))
    return c.error("Det needs floating-point square matrices of static size");
  int64_t n = type.getDimSize(rank - 1);
  if (n > 5)
    return c.error("Det of " + Twine(n) + "x" + Twine(n) +
                   " matrices is not supported (at most 5x5)");
  OpChain g(c);
  if (n == 0) { // the empty product: ones of the batch shape
    auto sum = reduce(c, "sum", {rank - 2, rank - 1}, false, x);
    if (failed(sum))
      return failure();
    return single(
        binaryOp(c, AddOp::getOperationName(), *sum, scalarLike(c, *sum, 1)));
  }
  std::vector<std::vector<Value>> at(n, std::vector<Value>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      at[i][j] = g.slice(g.slice(x, rank - 2, i, 1), rank - 1, j, 1);
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i)
    perm[i] = i;
  Value sum;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        inversions += perm[i] > perm[j];
    Value term = at[0][perm[0]];
    for (int64_t i = 1; i < n; ++i)
      term = g.mul(term, at[i][perm[i]]);
    if (!sum)
      sum = inversions % 2 ? g.sub(g.scalar(type.getElementType(), 0), term)
                           : term;
    else
      sum = inversions % 2 ? g.sub(sum, term) : g.add(sum, term);
  } while (std::next_permutation(perm.begin(), perm.end()));
  if (g.failed())
    return failure();
  return single(reduce(c, "sum", {rank - 2, rank - 1}, false, sum));
}

void addSpectralConverters(ConverterTable &table) {
  addRows(table, {
                     {"Det", convertDet},
                     {"DFT", convertDFT},
                     {"STFT", convertSTFT},
                 });
}

} // namespace kiln::onnx_import
