//===- CppGemm.cpp - library GEMMs and conv routines in C++ kernels -------===//
//
// A generic that oneDNN can run (an f32 GEMM, Gemm.h; a Winograd conv with
// its weight transformed) gets the library call in front of its loops,
// which run only without the library; a stem conv gets the prelude's
// kiln_conv_rows so. A GEMM whose result only an elementwise generic reads
// (a bias, an activation, a residual add) runs that epilogue on each tile
// of the product right after computing it, while the tile is in cache
// (kiln_sgemm_tiles), when the epilogue's loops are the product's; else the
// epilogue runs as its own loops after.
//
//===----------------------------------------------------------------------===//

#include "codegen/CppKernel.h"
#include "codegen/cpu/Tuning.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::cpp;

/// The f32 GEMM (Gemm.h) `op` is, if any.
std::optional<GemmMatch> cpp::libraryGemm(linalg::GenericOp op) {
  std::optional<GemmMatch> g = matchGemm(op);
  if (!g || !g->element.isF32())
    return std::nullopt;
  return g;
}

/// The kernel input holding the transformed weight of Winograd conv `op`
/// (kWinogradU), when its zero init is only for its fallback loops.
static std::optional<unsigned> winogradWeight(linalg::GenericOp op) {
  auto input = op->getAttrOfType<IntegerAttr>(kWinogradU);
  if (!input || !zeroFillOf(op) || !matchWinograd(op))
    return std::nullopt;
  return input.getInt();
}

bool CppEmitter::defersFill(linalg::FillOp fill) {
  if (!fill.getResult(0).hasOneUse())
    return false;
  auto user = dyn_cast<linalg::GenericOp>(*fill->getUsers().begin());
  return user && zeroFillOf(user) == fill &&
         (libraryGemm(user) || winogradWeight(user) || matchRowsConv(user));
}

/// `if (!kiln_winograd3x3(...)) {` in front of the loops of a 3x3 conv with
/// a transformed weight (kWinogradU): the loops run only without oneDNN.
/// True when emitted.
bool CppEmitter::emitWinogradCall(linalg::GenericOp op) {
  std::optional<unsigned> u = winogradWeight(op);
  if (!u)
    return false;
  Value in = op.getDpsInputs()[0];
  os << llvm::formatv(
      "  if (!kiln_winograd3x3({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
      "{9}, {10})) {\n",
      loopRange(op, 0), loopRange(op, 2), loopRange(op, 1), dimExpr(in, 2),
      dimExpr(in, 3), loopRange(op, 5), loopRange(op, 6), bufferFor(in),
      bufferFor(op.getDpsInputs()[1]),
      bufferFor(kernel.getBody().front().getArgument(*u)),
      bufferFor(op.getResult(0)));
  emitFillOp(zeroFillOf(op));
  return true;
}

/// Conv `op` read as images (loop 0) of [channels (loop 1)] x [n] products,
/// summed over k, for its epilogue's tiles.
static GemmMatch convProduct(linalg::GenericOp op, ArrayRef<unsigned> n,
                             ArrayRef<unsigned> k) {
  GemmMatch g;
  g.element = getElementTypeOrSelf(op.getResult(0).getType());
  g.batch = {0};
  g.m = {1};
  g.n.assign(n.begin(), n.end());
  g.k.assign(k.begin(), k.end());
  return g;
}

/// `op` as a GEMM whose result tiles an epilogue can follow: a library
/// GEMM, or a stem conv (matchRowsConv) read as images [n] of [m] x [oh,
/// ow] products, whose tiles kiln_conv_rows computes.
static std::optional<GemmMatch> tiledProduct(linalg::GenericOp op) {
  if (std::optional<GemmMatch> g = libraryGemm(op))
    return g;
  if (!matchRowsConv(op))
    return std::nullopt;
  return convProduct(op, {5, 6}, {2, 3, 4});
}

/// Whether `v` is the constant +0.
static bool isPositiveZero(Value v) {
  auto value = v ? v.getDefiningOp<arith::ConstantOp>() : arith::ConstantOp();
  auto zero = value ? dyn_cast<FloatAttr>(value.getValue()) : FloatAttr();
  return zero && zero.getValue().isPosZero();
}
/// The pad `op` is when it pads only the planes of a 4-D tensor, with
/// zeros: what kiln_conv_rows and kiln_dwconv3x3 write themselves as they
/// read its input.
static std::optional<PadMatch> zeroPlanePad(linalg::GenericOp op) {
  std::optional<PadMatch> match = planePad(op);
  if (!match || !isPositiveZero(match->value))
    return std::nullopt;
  return match;
}

linalg::GenericOp cpp::rowsConvPad(linalg::GenericOp conv) {
  if (!matchRowsConv(conv) || !zeroFillOf(conv))
    return nullptr;
  auto pad = conv.getDpsInputs()[0].getDefiningOp<linalg::GenericOp>();
  if (!pad || !pad->getResult(0).hasOneUse() || !zeroPlanePad(pad))
    return nullptr;
  return pad;
}

/// `if (!kiln_conv_rows(...)) {` in front of the loops of a stem conv
/// (matchRowsConv), which run only if it declines; with its epilogue on
/// each tile (kiln_conv_rows_tiles) where one follows. A zero pad of its
/// planes (rowsConvPad) is done by kiln_conv_rows as it copies the input,
/// and otherwise only in front of those loops. True when emitted.
bool CppEmitter::emitRowsConvCall(linalg::GenericOp op) {
  std::optional<DirectConv> conv = matchRowsConv(op);
  if (!conv || !zeroFillOf(op))
    return false;
  Value in = op.getDpsInputs()[0];
  linalg::GenericOp pad = rowsConvPad(op);
  std::optional<PadMatch> match = zeroPlanePad(pad);
  Value source = match ? match->input : in;
  SmallVector<int64_t> begin =
      match ? match->begin : SmallVector<int64_t>(4, 0);
  // The weight packed at compile time (kGroupedPanels), if it was.
  std::string panels = "nullptr";
  if (auto input = op->getAttrOfType<IntegerAttr>(kGroupedPanels))
    panels = bufferFor(kernel.getBody().front().getArgument(input.getInt()));
  std::string args = llvm::formatv(
      "{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, "
      "{13}, {14}, {15}, {16}, {17}, {18}, {19}",
      loopRange(op, 0), conv->groups, loopRange(op, 2), loopRange(op, 1),
      dimExpr(in, 2), dimExpr(in, 3), dimExpr(source, 2), dimExpr(source, 3),
      begin[2], begin[3], loopRange(op, 3), loopRange(op, 4), conv->sh,
      conv->sw, loopRange(op, 5), loopRange(op, 6), bufferFor(source),
      bufferFor(op.getDpsInputs()[1]), panels, bufferFor(op.getResult(0)));
  std::string tiled;
  if (linalg::GenericOp epilogue = gemmEpilogue(op))
    tiled =
        emitTiledGemm(op, *tiledProduct(op), epilogue, "", args, "",
                      "kiln_conv_rows_tiles", {source, op.getDpsInputs()[1]});
  os << "  if (" << (tiled.empty() ? "" : "!" + tiled + " && ")
     << "!kiln_conv_rows(" << args << ")) {\n";
  if (pad && failed(emitLoops(pad)))
    return false;
  emitFillOp(zeroFillOf(op));
  return true;
}

/// The bias a depthwise window's prologue broadcasts along its channels (a
/// generic yielding in[ch]), or null.
static Value channelBias(Operation *prologue) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(prologue);
  if (!generic || generic.getNumDpsInputs() != 1)
    return {};
  auto type = dyn_cast<RankedTensorType>(generic.getDpsInputs()[0].getType());
  MLIRContext *ctx = generic.getContext();
  AffineMap channel = AffineMap::get(4, 0, getAffineDimExpr(1, ctx));
  Block &body = generic.getRegion().front();
  if (!type || type.getRank() != 1 || !type.getElementType().isF32() ||
      generic.getNumLoops() != 4 ||
      generic.getMatchingIndexingMap(generic.getDpsInputOperand(0)) !=
          channel ||
      body.getTerminator()->getOperand(0) != body.getArgument(0))
    return {};
  return generic.getDpsInputs()[0];
}

/// `if (!kiln_dwconv3x3(...)) {` in front of the loops of a depthwise 3x3
/// window of equal strides (matchDepthwise) whose accumulator starts at a
/// constant or a bias along its channels, `if (!kiln_dwconv(...)) {`
/// in front of those of any other: the prelude reads the unpadded input
/// (its zero pad's, when a pad makes it) and runs the window's epilogue on
/// each plane or block of channels (the _tiles variants); the loops run
/// only if it declines.
/// True when emitted.
bool CppEmitter::emitDepthwiseCall(linalg::GenericOp op) {
  std::optional<DepthwiseConv> conv = matchDepthwise(op);
  if (!conv)
    return false;
  bool small = conv->kh == 3 && conv->kw == 3 && conv->sh == conv->sw;
  // Its input, or that of a pad of its planes with zeros.
  std::optional<PlaneSource> source = planeSource(op, conv->sh);
  if (!source || (source->padValue && !isPositiveZero(source->padValue)))
    return false;
  Operation *prologue = windowPrologue(op);
  std::string bias = "nullptr", init = "0.0f";
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(prologue)) {
    init = scalarOf(fill.getInputs()[0]);
  } else if (Value b = channelBias(prologue)) {
    bias = bufferFor(b);
  } else {
    return false;
  }
  // kiln_dwconv3x3 takes the plane's sizes as template arguments,
  // kiln_dwconv as arguments before the tensors.
  Value in = source->input;
  std::string sizes =
      small
          ? ""
          : llvm::formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, ",
                          dimExpr(in, 2), dimExpr(in, 3), source->top,
                          source->left, conv->kh, conv->kw, conv->sh, conv->sw,
                          loopRange(op, 2), loopRange(op, 3))
                .str();
  std::string args = llvm::formatv(
      "{0}, {1}, {2}{3}, {4}, {5}, {6}, {7}", loopRange(op, 0),
      loopRange(op, 1), sizes, bufferFor(in), bufferFor(op.getDpsInputs()[1]),
      bias, init, bufferFor(op.getResult(0)));
  std::string callee =
      small ? "kiln_dwconv3x3" + source->sizes : std::string("kiln_dwconv");
  linalg::GenericOp epilogue = windowEpilogue(op);
  if (!epilogue) {
    os << "  if (!" << callee << "(" << args << ")) {\n";
    return true;
  }
  // The epilogue on each plane, as on a GEMM's tiles: [n] images of
  // [channels] x [rows, columns].
  std::string tiled = emitTiledGemm(
      op, convProduct(op, {2, 3}, {4, 5, 6}), epilogue, "", args, "",
      small ? "kiln_dwconv3x3_tiles" + source->sizes
            : std::string("kiln_dwconv_tiles"),
      {source->input, op.getDpsInputs()[1]});
  if (tiled.empty())
    return false;
  os << "  if (!" << tiled << ") {\n";
  return true;
}

/// `if (!kiln_sgemm(...)) {` in front of the loops of an f32 GEMM (Gemm.h):
/// the loops run only without oneDNN, or when a dynamic dim of an operand is
/// not the loop's size (a dim of 1 broadcasting). True when emitted.
bool CppEmitter::emitGemmCall(linalg::GenericOp op) {
  std::optional<GemmMatch> g = libraryGemm(op);
  if (!g)
    return false;
  linalg::FillOp fill = zeroFillOf(op);
  auto size = [&](ArrayRef<unsigned> dims) {
    std::string product = "int64_t(1)";
    for (unsigned d : dims)
      product += " * " + loopRange(op, d);
    return product;
  };
  std::string m = fresh("m"), n = fresh("n"), k = fresh("k");
  os << llvm::formatv("  const int64_t {0} = {1}, {2} = {3}, {4} = {5};\n", m,
                      size(g->m), n, size(g->n), k, size(g->k));
  std::string check;
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto type = cast<RankedTensorType>(input->get().getType());
    AffineMap map = op.getMatchingIndexingMap(input);
    for (auto [i, e] : llvm::enumerate(map.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && type.isDynamicDim(i)) {
        std::string dim = dimExpr(input->get(), i),
                    range = loopRange(op, d.getPosition());
        if (dim != range)
          check += dim + " == " + range + " && ";
      }
  }
  // A stride of 0: one matrix for every image (a weight). An operand of a
  // batch of one image gets its size, though no second image reads it, so
  // that the prelude treats it as an image's data, as at any other batch (a
  // conv's input at a static batch of 1 took the tiles' path no more:
  // mobilenet_v2 1.05-1.10x slower).
  std::string strideA = g->batchedA || g->perImageA || g->sharedLeadA
                            ? m + " * " + k
                            : std::string("0");
  std::string strideB = g->batchedB || g->perImageB || g->sharedLeadB
                            ? k + " * " + n
                            : std::string("0");
  if (unsigned lead = g->sharedLeadA + g->sharedLeadB) {
    // Runs of GEMMs (images) of batches (groups), one operand the same in
    // every run (a grouped conv's weight).
    ArrayRef<unsigned> batch = g->batch;
    std::string inner = size(batch.drop_front(lead));
    auto outer = [&](bool batched, const std::string &matrix) {
      return batched ? "(" + inner + ") * " + matrix : std::string("0");
    };
    os << llvm::formatv(
        "  if (!({0}kiln_sgemm_runs({1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, "
        "{9}, {10}, {11}, {12}, {13}, {14}, {15}))) {\n",
        check, size(batch.take_front(lead)), inner, g->transA, g->transB, m, n,
        k, bufferFor(op.getDpsInputs()[g->a]), strideA,
        outer(g->batchedA, m + " * " + k),
        bufferFor(op.getDpsInputs()[1 - g->a]), strideB,
        outer(g->batchedB, k + " * " + n), bufferFor(op.getResult(0)), !fill);
    if (fill)
      emitFillOp(fill);
    return true;
  }
  // kiln_sgemm's arguments, which kiln_sgemm_tiles takes first too.
  std::string args = llvm::formatv(
      "{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}",
      size(g->batch), g->transA, g->transB, m, n, k,
      bufferFor(op.getDpsInputs()[g->a]), strideA,
      bufferFor(op.getDpsInputs()[1 - g->a]), strideB,
      bufferFor(op.getResult(0)), !fill);
  std::string call = "kiln_sgemm(" + args + ")";
  // B packed by kiln-pack-weights: small M streams the panels first.
  if (auto input = op->getAttrOfType<IntegerAttr>(kPackedB))
    call = llvm::formatv(
        "(kiln_sgemm_packed({0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}) "
        "|| {10})",
        size(g->batch), m, n, k, bufferFor(op.getDpsInputs()[g->a]), strideA,
        bufferFor(kernel.getBody().front().getArgument(input.getInt())),
        bufferFor(op.getResult(0)), !fill, kPackedRows, call);
  std::string tiled;
  if (linalg::GenericOp epilogue = gemmEpilogue(op))
    tiled = emitTiledGemm(op, *g, epilogue, check, args, m);
  os << "  if (" << (tiled.empty() ? "" : "!" + tiled + " && ") << "!(" << check
     << call << ")) {\n";
  if (fill)
    emitFillOp(fill);
  return true;
}

linalg::GenericOp CppEmitter::gemmEpilogue(linalg::GenericOp op) {
  std::optional<GemmMatch> g = tiledProduct(op);
  Value result = op.getResult(0);
  if (!g || g->batch.size() > 1 || g->sharedLeadA || g->sharedLeadB ||
      g->m.empty() || g->n.empty() || !result.hasOneUse())
    return {};
  auto user = dyn_cast<linalg::GenericOp>(*result.getUsers().begin());
  auto rank = cast<RankedTensorType>(result.getType()).getRank();
  if (!user || !fitsWindowLoops(user, rank) || absorbed(user))
    return {};
  // Both are emitted where the epilogue is, after all it reads is made.
  // Nothing in between may touch memory (or GEMM and epilogue would move
  // past it): only sizes and tensor.empty.
  for (Operation *between = op->getNextNode(); between != user;
       between = between->getNextNode())
    if (between->getNumRegions() ||
        (!isa<tensor::EmptyOp>(between) &&
         llvm::any_of(between->getResultTypes(),
                      [](Type t) { return isa<ShapedType>(t); })))
      return {};
  for (OpOperand *input : user.getDpsInputOperands())
    if (input->get() == result &&
        !user.getMatchingIndexingMap(input).isIdentity())
      return {};
  return user;
}

/// `const bool FLAG = GUARD && CALLEE(ARGS, em, en, TILE);`, with CALLEE
/// kiln_sgemm_tiles and ARGS kiln_sgemm's (or kiln_conv_rows_tiles and
/// kiln_conv_rows's), and TILE a lambda running `epilogue` on a tile of GEMM
/// `op` (an image, steps [mlo, mhi) of the first M dim, [nlo, nhi) of the
/// first N dim). The guard is `check` (the GEMM's), the epilogue's loops
/// being the product's dims, its output not being an input of the GEMM,
/// and with B packed, M (`m`) above the prelude's
/// kiln_packed_max_rows(kPackedRows) (else the packed GEMM runs). The callee
/// reads `reads` (by default, the inputs of `op`). Returns FLAG, or ""
/// (nothing emitted) when a size is unknown.
std::string CppEmitter::emitTiledGemm(linalg::GenericOp op, const GemmMatch &g,
                                      linalg::GenericOp epilogue,
                                      const std::string &check,
                                      const std::string &args,
                                      const std::string &m, StringRef callee,
                                      ArrayRef<Value> reads) {
  Value result = op.getResult(0);
  unsigned rank = epilogue.getNumLoops();
  AffineMap out = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto position = [&](unsigned d) {
    return out.getResultPosition(getAffineDimExpr(d, op.getContext()));
  };
  std::optional<unsigned> image =
      g.batch.empty() ? std::nullopt : position(g.batch[0]);
  std::optional<unsigned> rows = position(g.m[0]), cols = position(g.n[0]);
  if (!rows || !cols || (!g.batch.empty() && !image))
    return "";
  std::string guard = check;
  for (unsigned d = 0; d < rank; ++d) {
    std::string range = loopRange(epilogue, d), dim = dimExpr(result, d);
    if (range.empty() || dim.empty())
      return "";
    if (range != dim)
      guard += range + " == " + dim + " && ";
  }
  // A tile's epilogue must not overwrite what later tiles' GEMMs read (an
  // epilogue in place of the GEMM's input).
  declareOperands(epilogue);
  std::string written = bufferFor(epilogue.getResult(0));
  SmallVector<Value> read(reads.begin(), reads.end());
  if (reads.empty())
    for (Value input : op.getDpsInputs())
      read.push_back(input);
  for (Value input : read)
    guard += "static_cast<const void *>(" + written +
             ") != static_cast<const void *>(" + bufferFor(input) + ") && ";
  std::string em = loopRange(op, g.m[0]), en = loopRange(op, g.n[0]);
  if (op->hasAttr(kPackedB))
    guard +=
        m + " > kiln_packed_max_rows(" + std::to_string(kPackedRows) + ") && ";
  std::string tile = fresh("tile"), flag = fresh("tiled");
  os << "  const auto " << tile
     << " = [&](int64_t image, int64_t mlo, int64_t mhi, int64_t nlo, "
        "int64_t nhi) {\n";
  // The N dims from the tile's first on, contiguous in every operand, run
  // as one loop (7x7 planes vectorize then).
  unsigned flat =
      *cols + 1 < rank && flatFrom(epilogue, *cols) == *cols ? *cols : rank;
  std::string indent = "    ";
  for (unsigned d = 0; d < rank; ++d) {
    std::string from = "0", to = loopRange(epilogue, d);
    if (image && d == *image)
      from = "image", to = "image + 1";
    else if (d == *rows)
      from = "mlo", to = "mhi";
    else if (d == *cols)
      from = "nlo", to = "nhi";
    if (d == flat) {
      std::string inner = "int64_t(1)";
      for (unsigned i = flat + 1; i < rank; ++i)
        inner += " * " + loopRange(epilogue, i);
      from = "nlo * " + inner, to = "nhi * " + inner;
      d = rank - 1;
    }
    os << llvm::formatv("{0}for (int64_t d{1} = {2}; d{1} < {3}; ++d{1})",
                        indent, d, from, to)
       << (d + 1 == rank ? " {\n" : "\n");
    indent += "  ";
  }
  nameFlatDims(rank, flat);
  // A body that fails here fails again where the epilogue is emitted.
  LogicalResult body = emitGenericBody(epilogue, indent);
  dimNames.clear();
  if (failed(body))
    return "";
  os << indent.substr(2) << "}\n  };\n";
  os << "  const bool " << flag << " = " << guard << callee << "(" << args
     << ", " << em << ", " << en << ", " << tile << ");\n";
  tiledEpilogues[epilogue] = flag;
  return flag;
}
