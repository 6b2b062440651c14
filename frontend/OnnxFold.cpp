//===- OnnxFold.cpp - evaluate shape computations at import ---------------===//
//
// Exporters compute reshape targets with small integer subgraphs
// (Shape -> Slice -> Concat -> Reshape). A node whose inputs are all small
// integer constants is evaluated here, in the importer, into a new constant:
// the graph that reaches the passes holds only real tensor work.
//
// With symbolic dims, Shape is a kiln.shape op (data at run time) and the
// nodes computing on it stay ordinary ops; evaluated over affine
// expressions of the symbols (a symbol per symbolic dim, `N * 4`), their
// results are recorded in the import's shape table, so a Reshape or Expand
// target built from them still resolves at compile time. What cannot be
// evaluated is simply computed at run time (kiln.reshape_to and friends
// read shapes from data).
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxOps.h"

#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::onnx_import;

namespace {
constexpr int64_t kMaxElements = 4096;

using IntTensor = SymbolicInts;

std::optional<int64_t> constantOf(AffineExpr e) {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return c.getValue();
  return std::nullopt;
}

bool allConstant(const IntTensor &t) {
  return llvm::all_of(t.data, [](AffineExpr e) { return constantOf(e); });
}

std::optional<IntTensor> readInts(NodeContext &c, Value v) {
  if (const SymbolicInts *symbolic = symbolicInts(c, v))
    return *symbolic;
  auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!constant)
    return std::nullopt;
  auto type = constant.getType();
  Type element = type.getElementType();
  // Signless only: folding uses signed int64 arithmetic.
  if (!element.isSignlessInteger(64) && !element.isSignlessInteger(32) &&
      !element.isSignlessInteger(1))
    return std::nullopt;
  if (type.getNumElements() > kMaxElements)
    return std::nullopt;
  IntTensor t{type.getShape().vec(), {}, element};
  std::vector<char> bytes = getConstantBytes(constant.getValue());
  size_t width = element.isInteger(1) ? 1 : element.getIntOrFloatBitWidth() / 8;
  for (size_t i = 0; i + width <= bytes.size(); i += width) {
    int64_t value = 0;
    if (width == 8)
      std::memcpy(&value, &bytes[i], 8);
    else if (width == 4) {
      int32_t v32;
      std::memcpy(&v32, &bytes[i], 4);
      value = v32;
    } else {
      value = bytes[i] != 0;
    }
    t.data.push_back(getAffineConstantExpr(value, v.getContext()));
  }
  return t;
}

int64_t clampIndex(int64_t i, int64_t size, bool end) {
  if (i < 0)
    i += size;
  return std::max<int64_t>(end ? -1 : 0, std::min<int64_t>(i, size));
}

// With `quiet`, fails without a diagnostic (the node is then converted as
// ordinary ops).
FailureOr<IntTensor> evaluate(NodeContext &c, ArrayRef<IntTensor> in,
                              bool quiet) {
  StringRef op = c.node.op_type();
  MLIRContext *ctx = c.builder.getContext();
  auto fail = [&](const Twine &why) -> FailureOr<IntTensor> {
    if (quiet)
      return failure();
    return c.error(op + " on constant integers: " + why);
  };
  auto number = [&](int64_t v) { return getAffineConstantExpr(v, ctx); };
  // The values of `t`, which must be constant (indices, axes, conditions).
  auto constants =
      [&](const IntTensor &t) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (AffineExpr e : t.data) {
      std::optional<int64_t> v = constantOf(e);
      if (!v)
        return std::nullopt;
      out.push_back(*v);
    }
    return out;
  };
  auto symbolicFail = [&]() {
    return fail("values that depend on symbolic dims are not evaluated");
  };
  if (op == "Identity")
    return in[0];
  if (op == "Cast") {
    int to = c.getInt("to", 0);
    IntTensor out = in[0];
    if (to == onnx::TensorProto::INT64)
      out.element = c.builder.getI64Type();
    else if (to == onnx::TensorProto::INT32)
      out.element = c.builder.getI32Type();
    else
      return fail("only casts to int32/int64 are evaluated");
    return out;
  }
  // Elementwise ops: the operand giving the result's shape (the most
  // elements, then the highest rank); every other must have its shape or be
  // a single element of no higher rank, so broadcasting is trivial.
  auto widestOf = [&](ArrayRef<IntTensor> ts) -> const IntTensor * {
    const IntTensor *widest = &ts[0];
    for (const IntTensor &t : ts)
      if (t.data.size() > widest->data.size() ||
          (t.data.size() == widest->data.size() &&
           t.shape.size() > widest->shape.size()))
        widest = &t;
    for (const IntTensor &t : ts)
      if (t.shape != widest->shape &&
          (t.data.size() != 1 || t.shape.size() > widest->shape.size()))
        return nullptr;
    return widest;
  };
  if (op == "Where") {
    const IntTensor *widest = widestOf(in);
    if (!widest)
      return fail("only same-shape or scalar operands are evaluated");
    size_t n = widest->data.size();
    auto condition = constants(in[0]);
    if (!condition)
      return symbolicFail();
    IntTensor out{widest->shape, {}, in[1].element};
    for (size_t i = 0; i < n; ++i) {
      auto at = [&](const IntTensor &t) {
        return t.data[t.data.size() == 1 ? 0 : i];
      };
      out.data.push_back(
          (*condition)[condition->size() == 1 ? 0 : i] ? at(in[1]) : at(in[2]));
    }
    return out;
  }
  if (op == "Not" || op == "Neg" || op == "Abs") {
    auto values = constants(in[0]);
    if (!values)
      return symbolicFail();
    IntTensor out = in[0];
    for (auto [i, v] : llvm::enumerate(*values))
      out.data[i] = number(op == "Not" ? !v : op == "Neg" ? -v : std::abs(v));
    return out;
  }
  bool comparison = op == "Equal" || op == "Less" || op == "Greater" ||
                    op == "LessOrEqual" || op == "GreaterOrEqual";
  bool logical = op == "And" || op == "Or" || op == "Xor";
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod" ||
      op == "Max" || op == "Min" || comparison || logical) {
    const IntTensor &a = in[0], &b = in[1];
    bool scalarB = b.data.size() == 1, scalarA = a.data.size() == 1;
    SmallVector<IntTensor, 2> pair = {a, b};
    const IntTensor *widest = widestOf(pair);
    if (!widest)
      return fail("only same-shape or scalar operands are evaluated");
    IntTensor out = *widest;
    out.element = a.element;
    if (comparison)
      out.element = c.builder.getI1Type();
    for (size_t i = 0; i < out.data.size(); ++i) {
      AffineExpr ex = a.data[scalarA ? 0 : i], ey = b.data[scalarB ? 0 : i];
      std::optional<int64_t> cx = constantOf(ex), cy = constantOf(ey);
      if (!cx || !cy) {
        // Symbolic dims are sizes (>= 0): affine arithmetic by constants.
        if (op == "Add")
          out.data[i] = ex + ey;
        else if (op == "Sub")
          out.data[i] = ex - ey;
        else if (op == "Mul" && (cx || cy))
          out.data[i] = ex * ey;
        else if (op == "Div" && cy && *cy > 0)
          out.data[i] = ex.floorDiv(*cy);
        else if (op == "Mod" && cy && *cy > 0)
          out.data[i] = ex % *cy;
        else
          return symbolicFail();
        continue;
      }
      int64_t x = *cx, y = *cy;
      if ((op == "Div" || op == "Mod") && y == 0)
        return fail("division by zero");
      // Two's complement wrap-around, as the kernels compute it (signed
      // overflow is undefined in C++; INT64_MIN / -1 too).
      auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
      // The remainder with the divisor's sign (Mod, fmod = 0), adding y
      // only to a remainder of the other sign, which cannot overflow.
      auto floorMod = [](int64_t x, int64_t y) {
        int64_t r = x % y;
        return r != 0 && (r < 0) != (y < 0) ? r + y : r;
      };
      uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      if (y == -1 && (op == "Div" || op == "Mod"))
        y = 1, x = op == "Div" ? wrap(0 - ux) : 0;
      out.data[i] = number(op == "Add"              ? wrap(ux + uy)
                           : op == "Sub"            ? wrap(ux - uy)
                           : op == "Mul"            ? wrap(ux * uy)
                           : op == "Div"            ? x / y
                           : op == "Max"            ? std::max(x, y)
                           : op == "Min"            ? std::min(x, y)
                           : op == "Equal"          ? x == y
                           : op == "Less"           ? x < y
                           : op == "Greater"        ? x > y
                           : op == "LessOrEqual"    ? x <= y
                           : op == "GreaterOrEqual" ? x >= y
                           : op == "And"            ? (x && y)
                           : op == "Or"             ? (x || y)
                           : op == "Xor"            ? (!x != !y)
                                                    : floorMod(x, y));
    }
    return out;
  }
  if (op == "Unsqueeze") {
    // Scalars only (tryFold): the one place a dim can go is in front.
    IntTensor out = in[0];
    out.shape.insert(out.shape.begin(), 1);
    return out;
  }
  if (op == "Squeeze") {
    // The dims `axes` names (an input since opset 13, an attribute before),
    // each of size 1; all dims of size 1 without it.
    IntTensor out = in[0];
    int64_t rank = out.shape.size();
    std::vector<int64_t> axes = ints(c, "axes", {});
    if (in.size() > 1) {
      auto given = constants(in[1]);
      if (!given)
        return fail("axes known only at run time");
      axes = *given;
    }
    std::vector<bool> drop(rank, axes.empty());
    for (int64_t axis : axes) {
      if (axis < -rank || axis >= rank)
        return fail("axis " + Twine(axis) + " is outside rank " + Twine(rank));
      drop[axis < 0 ? axis + rank : axis] = true;
    }
    out.shape.clear();
    for (int64_t i = 0; i < rank; ++i) {
      if (drop[i] && in[0].shape[i] != 1) {
        if (!axes.empty())
          return fail("dim " + Twine(i) + " of size " + Twine(in[0].shape[i]) +
                      " cannot be squeezed");
        drop[i] = false;
      }
      if (!drop[i])
        out.shape.push_back(in[0].shape[i]);
    }
    if (out.shape.size() > 1)
      return fail("only scalars and vectors are evaluated");
    return out;
  }
  if (op == "Reshape") {
    auto spec = constants(in[1]);
    if (!spec)
      return symbolicFail();
    IntTensor out = in[0];
    out.shape.clear();
    int64_t known = 1, inferred = -1;
    for (auto [i, d] : llvm::enumerate(*spec)) {
      int64_t dim = d == 0 && i < in[0].shape.size() ? in[0].shape[i] : d;
      if (dim < -1)
        return fail("reshape to a negative size");
      if (dim == -1)
        inferred = i;
      else if (llvm::MulOverflow(known, dim, known))
        return fail("reshape to more elements than int64 counts");
      out.shape.push_back(dim);
    }
    if (inferred >= 0 && known > 0)
      out.shape[inferred] = out.data.size() / known;
    int64_t count = 1;
    for (int64_t d : out.shape)
      if (llvm::MulOverflow(count, d, count))
        return fail("reshape to more elements than int64 counts");
    if (count != (int64_t)out.data.size())
      return fail("cannot reshape " + Twine(out.data.size()) + " elements");
    return out;
  }
  if (op == "Range") {
    auto start0 = constantOf(in[0].data[0]), limit0 = constantOf(in[1].data[0]),
         delta0 = constantOf(in[2].data[0]);
    if (!start0 || !limit0 || !delta0)
      return symbolicFail();
    int64_t start = *start0, limit = *limit0, delta = *delta0;
    if (delta == 0)
      return fail("delta 0");
    IntTensor out{{0}, {}, in[0].element};
    for (int64_t v = start; delta > 0 ? v < limit : v > limit; v += delta) {
      if ((int64_t)out.data.size() >= kMaxElements)
        return fail("more than " + Twine(kMaxElements) + " elements");
      out.data.push_back(number(v));
    }
    out.shape[0] = out.data.size();
    return out;
  }
  if (op == "Concat") {
    IntTensor out{{0}, {}, in[0].element};
    for (const IntTensor &t : in) {
      if (t.shape.size() != 1)
        return fail("only vectors are evaluated");
      out.data.insert(out.data.end(), t.data.begin(), t.data.end());
    }
    out.shape[0] = out.data.size();
    return out;
  }
  if (op == "Gather") {
    const IntTensor &data = in[0], &idx = in[1];
    if (data.shape.size() != 1)
      return fail("only vector data is evaluated");
    auto indices = constants(idx);
    if (!indices)
      return symbolicFail();
    IntTensor out{idx.shape, {}, data.element};
    int64_t n = data.data.size();
    for (int64_t i : *indices) {
      if (i < -n || i >= n)
        return fail("index " + Twine(i) + " is out of range");
      out.data.push_back(data.data[i < 0 ? i + n : i]);
    }
    return out;
  }
  // The element of `t` at each index of `shape` (row-major), `at` giving
  // its offset in t: the movement ops below.
  auto gather = [&](const IntTensor &t, std::vector<int64_t> shape,
                    llvm::function_ref<int64_t(ArrayRef<int64_t>)> at) {
    IntTensor out{std::move(shape), {}, t.element};
    int64_t count = 1;
    for (int64_t d : out.shape)
      count *= d;
    std::vector<int64_t> index(out.shape.size(), 0);
    for (int64_t k = 0; k < count; ++k) {
      out.data.push_back(t.data[at(index)]);
      for (int64_t i = int64_t(index.size()) - 1; i >= 0; --i) {
        if (++index[i] < out.shape[i])
          break;
        index[i] = 0;
      }
    }
    return out;
  };
  if (op == "Transpose") {
    // torch's export of F.pad reorders the pads with a Transpose.
    const IntTensor &data = in[0];
    int64_t rank = data.shape.size();
    std::vector<int64_t> perm = ints(c, "perm", {});
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    std::vector<bool> seen(rank, false);
    if (int64_t(perm.size()) != rank)
      return fail("perm has " + Twine(perm.size()) + " entries for rank " +
                  Twine(rank));
    for (int64_t p : perm) {
      if (p < 0 || p >= rank || seen[p])
        return fail("perm is not a permutation of the dims");
      seen[p] = true;
    }
    std::vector<int64_t> shape;
    SmallVector<int64_t> strides = computeStrides(data.shape);
    for (int64_t p : perm)
      shape.push_back(data.shape[p]);
    return gather(data, shape, [&](ArrayRef<int64_t> index) {
      int64_t offset = 0;
      for (int64_t i = 0; i < rank; ++i)
        offset += index[i] * strides[perm[i]];
      return offset;
    });
  }
  if (op == "Slice") {
    const IntTensor &data = in[0];
    int64_t rank = data.shape.size();
    if (rank == 0 || in.size() < 3)
      return fail("only tensors with starts and ends are evaluated");
    // `in` skips omitted inputs: steps after omitted axes would read as axes.
    if (in.size() != c.inputs.size())
      return fail("omitted axes are evaluated only without steps");
    std::vector<std::vector<int64_t>> args; // starts, ends, axes, steps
    for (size_t i = 1; i < in.size() && i < 5; ++i) {
      auto v = constants(in[i]);
      if (!v)
        return symbolicFail();
      args.push_back(*v);
    }
    size_t n = args[0].size();
    if (args[1].size() != n)
      return fail("starts and ends differ in length");
    if (args.size() < 3 || args[2].empty()) {
      args.resize(std::max<size_t>(args.size(), 3));
      for (size_t i = 0; i < n; ++i)
        args[2].push_back(i);
    }
    if (args.size() < 4 || args[3].empty())
      args.resize(4), args[3].assign(n, 1);
    if (args[2].size() != n || args[3].size() != n)
      return fail("axes or steps differ in length from starts");
    // Per dim, the indices it keeps (all of them where no axis names it).
    std::vector<std::vector<int64_t>> kept(rank);
    std::vector<bool> named(rank, false);
    for (size_t k = 0; k < n; ++k) {
      int64_t axis = args[2][k], step = args[3][k];
      if (axis < -rank || axis >= rank)
        return fail("axis " + Twine(axis) + " is outside rank " + Twine(rank));
      axis = axis < 0 ? axis + rank : axis;
      if (named[axis])
        return fail("axis " + Twine(axis) + " is named twice");
      if (step == 0)
        return fail("step 0");
      named[axis] = true;
      int64_t size = data.shape[axis], start = args[0][k], end = args[1][k];
      if (step > 0) {
        start = clampIndex(start, size, false);
        end = std::max<int64_t>(0, clampIndex(end, size, false));
        for (int64_t i = start; i < end; i += step)
          kept[axis].push_back(i);
      } else {
        // A backward start clamps into [0, size - 1], as ONNX says.
        start = std::max<int64_t>(
            0, std::min<int64_t>(clampIndex(start, size, true), size - 1));
        end = clampIndex(end, size, true);
        for (int64_t i = start; size > 0 && i > end; i += step)
          kept[axis].push_back(i);
      }
    }
    std::vector<int64_t> shape;
    SmallVector<int64_t> strides = computeStrides(data.shape);
    for (int64_t d = 0; d < rank; ++d) {
      if (!named[d])
        for (int64_t i = 0; i < data.shape[d]; ++i)
          kept[d].push_back(i);
      shape.push_back(kept[d].size());
    }
    return gather(data, shape, [&](ArrayRef<int64_t> index) {
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d)
        offset += kept[d][index[d]] * strides[d];
      return offset;
    });
  }
  return fail("not evaluated");
}

const llvm::StringSet<> &foldable() {
  static const llvm::StringSet<> ops = {
      "Identity", "Cast", "Add", "Sub", "Mul", "Div", "Mod", "Max", "Min",
      "Neg", "Abs", "Unsqueeze", "Squeeze", "Concat", "Gather", "Slice",
      "Reshape", "Range", "Transpose",
      // Conditions (an If's, say) on shapes.
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
      "Xor", "Not", "Where"};
  return ops;
}

const llvm::StringSet<> &onlyFolded() {
  static const llvm::StringSet<> ops = {}; // every foldable op has kernels
  return ops;
}
} // namespace

bool kiln::onnx_import::isOnlyFolded(StringRef opType) {
  return onlyFolded().contains(opType);
}

std::optional<FailureOr<SmallVector<Value>>>
kiln::onnx_import::tryFold(NodeContext &c) {
  if (!foldable().contains(c.node.op_type()))
    return std::nullopt;
  SmallVector<IntTensor> in;
  bool symbolic = false;
  for (Value v : c.inputs) {
    if (!v) // an omitted optional input
      continue;
    auto t = readInts(c, v);
    if (!t) {
      if (isOnlyFolded(c.node.op_type()))
        return FailureOr<SmallVector<Value>>(
            c.error("'" + c.node.op_type() +
                    "' is supported on constant integer tensors only (shape "
                    "computations, folded at import); bind symbolic input "
                    "dims with --input-shape"));
      return std::nullopt;
    }
    symbolic |= !allConstant(*t);
    in.push_back(std::move(*t));
  }
  StringRef op = c.node.op_type();
  // Max and Min are variadic; only the two-operand form is evaluated.
  if ((op == "Max" || op == "Min") && in.size() != 2)
    return std::nullopt;
  if (op == "Where" && in.size() != 3)
    return std::nullopt;
  // Only shape vectors are evaluated; anything bigger is converted as usual.
  if (op == "Unsqueeze" && !in[0].shape.empty())
    return std::nullopt;
  // Unsqueeze's axes come as a second input since opset 13; a scalar's one
  // place to add a dim is in front. Squeeze reads its axes (evaluate).
  if (op == "Unsqueeze" && in.size() > 1)
    in.resize(1);
  // Integers cast to floats (e.g. a head size turned into a scale).
  if (op == "Cast" && (c.getInt("to", 0) == onnx::TensorProto::FLOAT ||
                       c.getInt("to", 0) == onnx::TensorProto::DOUBLE)) {
    bool f32 = c.getInt("to", 0) == onnx::TensorProto::FLOAT;
    Type element =
        f32 ? Type(c.builder.getF32Type()) : Type(c.builder.getF64Type());
    auto plain = RankedTensorType::get(in[0].shape, element);
    if (symbolic)
      return std::nullopt; // data computed at run time
    SmallVector<Attribute> values;
    for (AffineExpr e : in[0].data)
      values.push_back(c.builder.getFloatAttr(element, double(*constantOf(e))));
    Value constant = c.builder.create<ConstantOp>(
        c.loc, RankedTensorType::get(in[0].shape, element, c.device),
        DenseElementsAttr::get(plain, values));
    return FailureOr<SmallVector<Value>>(SmallVector<Value>{constant});
  }
  // What folding does not cover is converted as ordinary ops, computed at
  // run time; only ops kiln has no kernels for must fold.
  bool mustFold = isOnlyFolded(op);
  auto out = evaluate(c, in, /*quiet=*/!mustFold);
  if (failed(out))
    return mustFold ? std::optional(FailureOr<SmallVector<Value>>(failure()))
                    : std::nullopt;
  if (allConstant(*out))
    return FailureOr<SmallVector<Value>>(SmallVector<Value>{makeInts(c, *out)});
  // Symbolic: the node's ordinary ops compute it at run time; the table
  // remembers what they hold, for Reshape and Expand targets.
  Converter convert = findConverter(op);
  if (!convert)
    return std::nullopt;
  auto real = convert(c);
  if (succeeded(real) && real->size() == 1)
    c.shapes->values[real->front()] = *out;
  return real;
}

AffineExpr ShapeTable::dimOf(Value v, int64_t i) {
  auto type = cast<RankedTensorType>(v.getType());
  if (!type.isDynamicDim(i))
    return getAffineConstantExpr(type.getDimSize(i), v.getContext());
  auto at = llvm::find(symbols, std::make_pair(v, i));
  if (at == symbols.end())
    at = symbols.insert(symbols.end(), {v, i});
  return getAffineSymbolExpr(at - symbols.begin(), v.getContext());
}

const SymbolicInts *kiln::onnx_import::symbolicInts(NodeContext &c, Value v) {
  if (!c.shapes || !v)
    return nullptr;
  auto it = c.shapes->values.find(v);
  return it == c.shapes->values.end() ? nullptr : &it->second;
}

Value kiln::onnx_import::makeInts(NodeContext &c, const SymbolicInts &t) {
  auto type = RankedTensorType::get(t.shape, t.element, c.device);
  auto plain = RankedTensorType::get(t.shape, t.element);
  SmallVector<APInt> values;
  unsigned width = t.element.getIntOrFloatBitWidth();
  for (AffineExpr e : t.data)
    values.push_back(APInt(width, *constantOf(e), /*isSigned=*/true));
  return c.builder.create<ConstantOp>(c.loc, type,
                                      DenseElementsAttr::get(plain, values));
}
