//===- Einsum.cpp - Einsum as broadcast products and sums -----------------===//
//
// Einsum(equation, inputs...) decomposes into kiln ops:
//  1. Parse: each term's letters, "..." expanded to labels of its own (the
//     broadcast dims, aligned at the right); without "->" the output is the
//     broadcast dims, then the letters used once in ASCII order.
//  2. A letter repeated within a term takes the diagonal: where(i == j,
//     x, 0) summed over the second occurrence (iotas, so sizes may be
//     symbolic).
//  3. Every operand is transposed to the order of the letters as they first
//     appear and given size-1 dims for the letters it lacks; the product of
//     all of them (numpy broadcasting) is summed over the letters the output
//     lacks, then transposed to the output's order.
// This is exact but does the contraction as a broadcast product: O(product
// of all the letters' sizes) memory and work, fine for the small einsums
// models use beside their matmuls, not a replacement for MatMul.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include "llvm/ADT/StringExtras.h"

#include <map>

using namespace mlir;
using namespace kiln;

namespace kiln::onnx_import {
namespace {

// `x` with a size-1 dim inserted at each of `axes` (ascending, in the
// result).
FailureOr<Value> unsqueezed(NodeContext &c, Value x, ArrayRef<int64_t> axes) {
  if (axes.empty())
    return x;
  SmallVector<int64_t> shape(typeOf(x).getShape());
  for (int64_t a : axes)
    shape.insert(shape.begin() + a, 1);
  if (llvm::count_if(shape, ShapedType::isDynamic) <= 1)
    return reshapeToDims(c, x, shape);
  return reshapeBySpec(c, x, int64Constant(c, {(int64_t)axes.size()}, axes),
                       "unsqueeze");
}

FailureOr<Value> transposed(NodeContext &c, Value x, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (auto [i, p] : llvm::enumerate(perm))
    identity &= static_cast<int64_t>(i) == p;
  if (identity)
    return x;
  return c.create(
      TransposeOp::getOperationName(), x,
      {c.builder.getNamedAttr("perm", c.builder.getDenseI64ArrayAttr(perm))});
}

} // namespace

FailureOr<Values> convertEinsum(NodeContext &c) {
  if (c.inputs.empty() || failed(arity(c, c.inputs.size(), c.inputs.size())))
    return c.error("Einsum needs inputs");
  std::string equation;
  for (char ch : c.getString("equation", ""))
    if (ch != ' ')
      equation += ch;
  size_t arrow = equation.find("->");
  std::string lhs = equation.substr(0, arrow);
  SmallVector<std::string> terms;
  for (StringRef t : llvm::split(StringRef(lhs), ','))
    terms.push_back(t.str());
  if (terms.size() != c.inputs.size())
    return c.error("Einsum equation '" + equation + "' has " +
                   Twine(terms.size()) + " terms for " +
                   Twine(c.inputs.size()) + " inputs");
  for (char ch : equation)
    if (!llvm::isAlpha(ch) && !StringRef(",.->").contains(ch))
      return c.error("Einsum equation '" + equation +
                     "' has an unexpected character");
  // "..." becomes labels '0', '1', ... (never letters of the equation),
  // aligned at the right (the most broadcast dims any term has).
  int64_t ellipsis = 0;
  for (auto [term, x] : llvm::zip(terms, c.inputs)) {
    size_t at = term.find("...");
    if (at == std::string::npos)
      continue;
    int64_t explicitLetters = term.size() - 3;
    ellipsis =
        std::max<int64_t>(ellipsis, typeOf(x).getRank() - explicitLetters);
  }
  auto broadcastLetters = [&](int64_t n) {
    std::string s;
    for (int64_t i = ellipsis - n; i < ellipsis; ++i)
      s += static_cast<char>('0' + i);
    return s;
  };
  for (auto [term, x] : llvm::zip(terms, c.inputs)) {
    size_t at = term.find("...");
    if (at != std::string::npos)
      term.replace(at, 3,
                   broadcastLetters(typeOf(x).getRank() - (term.size() - 3)));
    if (static_cast<int64_t>(term.size()) != typeOf(x).getRank())
      return c.error("Einsum term '" + term +
                     "' does not match an input of "
                     "rank " +
                     Twine(typeOf(x).getRank()));
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = equation.substr(arrow + 2);
    size_t at = out.find("...");
    if (at != std::string::npos)
      out.replace(at, 3, broadcastLetters(ellipsis));
  } else {
    std::map<char, int> counts;
    for (const std::string &term : terms)
      for (char ch : term)
        ++counts[ch];
    out = broadcastLetters(ellipsis);
    for (auto [ch, n] : counts)
      if (n == 1 && llvm::isAlpha(ch)) // ASCII order, as numpy
        out += ch;
  }
  // The letters in order of first appearance.
  std::string all;
  for (const std::string &term : terms)
    for (char ch : term)
      if (all.find(ch) == std::string::npos)
        all += ch;
  for (char ch : out)
    if (all.find(ch) == std::string::npos)
      return c.error("Einsum output letter '" + Twine(ch) + "' is in no input");

  Value product;
  for (auto [term, input] : llvm::zip(terms, c.inputs)) {
    Value x = input;
    // Diagonals: a repeated letter keeps the elements where both agree.
    for (size_t q = 0; q < term.size(); ++q) {
      size_t p = term.find(term[q]);
      if (p == q)
        continue;
      int64_t rank = term.size();
      auto ip = iotaAlong(c, x, p, rank, p);
      auto iq = iotaAlong(c, x, q, rank, q);
      if (failed(ip) || failed(iq))
        return failure();
      auto same = binaryOp(c, EqualOp::getOperationName(), *ip, *iq);
      if (failed(same))
        return failure();
      auto kept = c.create(WhereOp::getOperationName(),
                           ValueRange{*same, x, scalarLike(c, x, 0)});
      if (failed(kept))
        return failure();
      auto summed = reduce(c, "sum", {(int64_t)q}, false, *kept);
      if (failed(summed))
        return failure();
      x = *summed;
      term.erase(q, 1);
      --q;
    }
    // To the order of `all`, with size-1 dims for the missing letters.
    SmallVector<int64_t> perm, missing;
    std::string ordered;
    for (char ch : all)
      if (size_t at = term.find(ch); at != std::string::npos) {
        perm.push_back(at);
        ordered += ch;
      }
    auto t = transposed(c, x, perm);
    if (failed(t))
      return failure();
    for (auto [i, ch] : llvm::enumerate(all))
      if (ordered.find(ch) == std::string::npos)
        missing.push_back(i);
    auto full = unsqueezed(c, *t, missing);
    if (failed(full))
      return failure();
    if (!product) {
      product = *full;
      continue;
    }
    auto mul = binaryOp(c, MulOp::getOperationName(), product, *full);
    if (failed(mul))
      return failure();
    product = *mul;
  }
  std::vector<int64_t> summedAxes;
  std::string kept;
  for (auto [i, ch] : llvm::enumerate(all)) {
    if (out.find(ch) == std::string::npos)
      summedAxes.push_back(i);
    else
      kept += ch;
  }
  Value result = product;
  if (!summedAxes.empty()) {
    auto summed = reduce(c, "sum", summedAxes, false, product);
    if (failed(summed))
      return failure();
    result = *summed;
  }
  SmallVector<int64_t> perm;
  for (char ch : out)
    perm.push_back(kept.find(ch));
  return single(transposed(c, result, perm));
}

void addEinsumConverters(ConverterTable &table) {
  addRows(table, {
                     {"Einsum", convertEinsum},
                 });
}

} // namespace kiln::onnx_import
