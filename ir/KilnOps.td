//===- KilnOps.td - the kiln dialect: devices, graph ops, kernels -*- tablegen -*-===//
//
// Graph level: ONNX-like ops on ranked tensors whose encoding is a
// #kiln.device attribute. Every op but kiln.copy keeps all of its tensors on
// one device. Kernel level: kiln.kernel regions, whose bodies hold
// linalg/arith/math on plain tensors once lowered (docs/architecture.md).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS
#define KILN_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let summary = "graph-level tensor programs with devices in their types";
  let cppNamespace = "::kiln";
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

//===----------------------------------------------------------------------===//
// Device attribute
//===----------------------------------------------------------------------===//

def Kiln_DeviceAttr : AttrDef<Kiln_Dialect, "Device"> {
  let mnemonic = "device";
  let summary = "where a tensor lives: cpu, cuda:N or sim:N";
  let description = [{
    Used as the encoding of every ranked tensor in the kiln dialect, e.g.
    `tensor<8x16xf32, #kiln.device<cpu>>` or `#kiln.device<cuda:1>`.
    `cpu` has no ordinal; `cuda` and `sim` (a host-memory test device) need one.
  }];
  let parameters = (ins StringRefParameter<"device kind">:$kind,
                        "int64_t":$ordinal);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The printed name, e.g. "cpu" or "cuda:0".
    std::string str() const;
    static DeviceAttr getCPU(::mlir::MLIRContext *ctx) {
      return get(ctx, "cpu", -1);
    }
    /// Parses "cpu", "cuda:N", "sim:N"; null and a message when malformed.
    static DeviceAttr parseName(::mlir::MLIRContext *ctx, ::llvm::StringRef name,
                                std::string &error);
  }];
}

//===----------------------------------------------------------------------===//
// Types and traits
//===----------------------------------------------------------------------===//

// Integers are signless (ONNX's signed types and bool) or unsigned (ui8..ui64:
// ONNX's uint types); kernel lowering makes them signless (docs/architecture.md).
def Kiln_Tensor : RankedTensorOf<[AnyFloat, AnySignlessInteger,
                                  AnyUnsignedInteger]>;

// All tensor operands and results carry a #kiln.device encoding, the same one.
def Kiln_SameDevice : NativeOpTrait<"SameDevice"> {
  let cppNamespace = "::kiln::OpTrait";
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

// Ops whose result types follow from their operands (shape inference).
class Kiln_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Kiln_Op<mnemonic, !listconcat([Pure, Kiln_SameDevice,
        DeclareOpInterfaceMethods<InferTypeOpInterface>], traits)> {
  let extraClassDeclaration = [{
    /// Accepts a declared result with `?` where the inferred one is static.
    static bool isCompatibleReturnTypes(::mlir::TypeRange l,
                                        ::mlir::TypeRange r);
  }];
}

//===----------------------------------------------------------------------===//
// Graph ops
//===----------------------------------------------------------------------===//

def Kiln_ConstantOp : Kiln_Op<"constant",
    [ConstantLike, Pure, Kiln_SameDevice]> {
  let summary = "a constant or weight tensor";
  let description = [{
    Weights are held as dense resource blobs (printed once, in the file's
    resource section), small constants as dense elements.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_CopyOp : Kiln_Op<"copy", [Pure]> {
  let summary = "moves a tensor to another device; the only op that may";
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

// Elementwise ops: one scalar function applied at every index, with numpy
// (ONNX multidirectional) broadcasting for binary ops.
def Kiln_Elementwise : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::kiln::OpTrait";
}

class Kiln_UnaryOp<string mnemonic, string desc>
    : Kiln_ComputeOp<mnemonic, [Kiln_Elementwise]> {
  let summary = desc;
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

class Kiln_BinaryOp<string mnemonic, string desc>
    : Kiln_ComputeOp<mnemonic, [Kiln_Elementwise]> {
  let summary = desc # " with numpy broadcasting";
  let arguments = (ins Kiln_Tensor:$lhs, Kiln_Tensor:$rhs);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "elementwise sum">;
def Kiln_SubOp : Kiln_BinaryOp<"sub", "elementwise difference">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "elementwise product">;
def Kiln_DivOp : Kiln_BinaryOp<"div", "elementwise quotient">;
def Kiln_PowOp : Kiln_BinaryOp<"pow", "elementwise power">;

def Kiln_ReluOp : Kiln_UnaryOp<"relu", "max(x, 0)">;
def Kiln_ErfOp : Kiln_UnaryOp<"erf", "the error function">;
def Kiln_TanhOp : Kiln_UnaryOp<"tanh", "hyperbolic tangent">;
def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Kiln_ExpOp : Kiln_UnaryOp<"exp", "e to the x">;
def Kiln_NegOp : Kiln_UnaryOp<"neg", "-x">;
def Kiln_SqrtOp : Kiln_UnaryOp<"sqrt", "square root">;
def Kiln_LogOp : Kiln_UnaryOp<"log", "natural logarithm">;
def Kiln_AbsOp : Kiln_UnaryOp<"abs", "absolute value">;
def Kiln_FloorOp : Kiln_UnaryOp<"floor", "round down">;
def Kiln_CeilOp : Kiln_UnaryOp<"ceil", "round up">;
def Kiln_SinOp : Kiln_UnaryOp<"sin", "sine">;
def Kiln_CosOp : Kiln_UnaryOp<"cos", "cosine">;
def Kiln_NotOp : Kiln_UnaryOp<"not", "logical not of i1, bitwise not of other integers">;
def Kiln_SignOp : Kiln_UnaryOp<"sign", "-1, 0 or 1 (NaN stays NaN)">;
def Kiln_RoundOp : Kiln_UnaryOp<"round", "round half to even">;
def Kiln_TanOp : Kiln_UnaryOp<"tan", "tangent">;
def Kiln_AsinOp : Kiln_UnaryOp<"asin", "arcsine">;
def Kiln_AcosOp : Kiln_UnaryOp<"acos", "arccosine">;
def Kiln_AtanOp : Kiln_UnaryOp<"atan", "arctangent">;
def Kiln_SinhOp : Kiln_UnaryOp<"sinh", "hyperbolic sine">;
def Kiln_CoshOp : Kiln_UnaryOp<"cosh", "hyperbolic cosine">;
def Kiln_AsinhOp : Kiln_UnaryOp<"asinh", "inverse hyperbolic sine">;
def Kiln_AcoshOp : Kiln_UnaryOp<"acosh", "inverse hyperbolic cosine">;
def Kiln_AtanhOp : Kiln_UnaryOp<"atanh", "inverse hyperbolic tangent">;

def Kiln_MaxOp : Kiln_BinaryOp<"max", "elementwise maximum (NaN wins)">;
def Kiln_MinOp : Kiln_BinaryOp<"min", "elementwise minimum (NaN wins)">;
def Kiln_AndOp : Kiln_BinaryOp<"and", "logical (i1) or bitwise and">;
def Kiln_OrOp : Kiln_BinaryOp<"or", "logical (i1) or bitwise or">;
def Kiln_XorOp : Kiln_BinaryOp<"xor", "logical (i1) or bitwise xor">;
def Kiln_ShiftLeftOp : Kiln_BinaryOp<"shift_left", "a << b, 0 when b is negative or at least the bit width">;
def Kiln_ShiftRightOp : Kiln_BinaryOp<"shift_right",
    "a >> b (arithmetic when signed), saturating when b is out of range">;

// Comparisons: numpy broadcasting, an i1 result.
class Kiln_CompareOp<string mnemonic, string desc>
    : Kiln_BinaryOp<mnemonic, desc>;
def Kiln_EqualOp : Kiln_CompareOp<"equal", "a == b">;
def Kiln_LessOp : Kiln_CompareOp<"less", "a < b">;
def Kiln_LessEqualOp : Kiln_CompareOp<"less_equal", "a <= b">;
def Kiln_GreaterOp : Kiln_CompareOp<"greater", "a > b">;
def Kiln_GreaterEqualOp : Kiln_CompareOp<"greater_equal", "a >= b">;


def Kiln_ModOp : Kiln_BinaryOp<"mod", "remainder: C fmod when `fmod`, else with the divisor's sign"> {
  let arguments = (ins Kiln_Tensor:$lhs, Kiln_Tensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$fmod);
}

def Kiln_WhereOp : Kiln_ComputeOp<"where", [Kiln_Elementwise]> {
  let summary = "cond ? x : y with numpy broadcasting of all three";
  let arguments = (ins Kiln_Tensor:$cond, Kiln_Tensor:$x, Kiln_Tensor:$y);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $x `,` $y attr-dict `:` type($cond) `,` type($x) `,` type($y)
    `->` type($result)
  }];
}

def Kiln_GeluOp : Kiln_ComputeOp<"gelu", [Kiln_Elementwise]> {
  let summary = "x * Phi(x), exact (erf) or tanh-approximated";
  let arguments = (ins Kiln_Tensor:$input,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate_tanh);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_MatMulOp : Kiln_ComputeOp<"matmul"> {
  let summary = "numpy matmul: batched, broadcasting, 1-D operands promoted";
  let arguments = (ins Kiln_Tensor:$lhs, Kiln_Tensor:$rhs);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Kiln_GemmOp : Kiln_ComputeOp<"gemm"> {
  let summary = "alpha * op(A) * op(B) + beta * C on 2-D A and B (ONNX Gemm)";
  let arguments = (ins Kiln_Tensor:$a, Kiln_Tensor:$b,
                       Optional<Kiln_Tensor>:$c,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_b);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` type($a) `,` type($b) (`,` type($c)^)?
    `->` type($result)
  }];
  let hasCanonicalizer = 1;
}

def Kiln_CastOp : Kiln_ComputeOp<"cast", [Kiln_Elementwise]> {
  let summary = "converts elements to type `to` (ONNX Cast; ints are signed)";
  let description = [{
    Floats round to nearest even. `saturate` (ONNX's, for float8 results):
    values beyond the range become its largest finite value; without it,
    Inf or NaN.
  }];
  let arguments = (ins Kiln_Tensor:$input, TypeAttr:$to,
                       DefaultValuedAttr<BoolAttr, "true">:$saturate);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_BitcastOp : Kiln_ComputeOp<"bitcast", [Kiln_Elementwise]> {
  let summary = "reinterprets each element's bits as type `to` (ONNX BitCast)";
  let description = [{
    Both types have the same width; bool reads as the byte it is stored in.
  }];
  let arguments = (ins Kiln_Tensor:$input, TypeAttr:$to);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_ClipOp : Kiln_ComputeOp<"clip", [Kiln_Elementwise]> {
  let summary = "min(max(x, min), max); NaN stays NaN";
  let arguments = (ins Kiln_Tensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_ConvOp : Kiln_ComputeOp<"conv"> {
  let summary = "N-d grouped convolution (ONNX Conv, explicit pads)";
  let description = [{
    input [N, C, D1..Dr], weight [M, C/group, K1..Kr], optional bias [M].
    `pads` holds the r begin pads then the r end pads. `group` 0 is
    depthwise: one group per input channel, however many there are at run
    time (weight [M, 1, K1..Kr], M a multiple of C).
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$weight,
                       Optional<Kiln_Tensor>:$bias,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
}

def Kiln_MaxPoolOp : Kiln_ComputeOp<"max_pool"> {
  let summary = "N-d max pooling (ONNX MaxPool, explicit pads)";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, BoolAttr:$ceil_mode);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_ReduceOp : Kiln_ComputeOp<"reduce"> {
  let summary = "sum, mean, max or min over `axes`";
  let arguments = (ins Kiln_Tensor:$input, StrAttr:$kind,
                       DenseI64ArrayAttr:$axes, BoolAttr:$keepdims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_ReshapeOp : Kiln_ComputeOp<"reshape"> {
  let summary = "the same elements in a new shape; a view, never a copy";
  let description = [{
    `shape` gives each result dim: a size (0 included), -1 inferred from the
    element count (at most one), or -2 (kiln::kReshapeCopy) the input's dim
    at the same index. ONNX's 0 that copies a dim becomes -2, so that a dim
    of size 0 can be stated too.
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Kiln_ExpandOp : Kiln_ComputeOp<"expand", [Kiln_Elementwise]> {
  let summary = "broadcasts the input to `shape` (ONNX Expand, resolved)";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_SliceOp : Kiln_ComputeOp<"slice"> {
  let summary = "a strided window: result[i] = input[starts + i * steps]";
  let description = [{
    One start, size and step per dim (resolved from ONNX Slice/Split);
    steps may be negative.
  }];
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$sizes, DenseI64ArrayAttr:$steps);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_ConcatOp : Kiln_ComputeOp<"concat"> {
  let summary = "joins tensors along `axis`";
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` type($inputs) `->` type($result)
  }];
}

def Kiln_AvgPoolOp : Kiln_ComputeOp<"avg_pool"> {
  let summary = "N-d average pooling (ONNX AveragePool, explicit pads)";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations, BoolAttr:$ceil_mode,
                       BoolAttr:$count_include_pad);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_GatherElementsOp : Kiln_ComputeOp<"gather_elements"> {
  let summary = "ONNX GatherElements: result[i] = data[i with i[axis] = indices[i]]";
  let arguments = (ins Kiln_Tensor:$data, Kiln_Tensor:$indices, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->`
    type($result)
  }];
}

def Kiln_TransposeOp : Kiln_ComputeOp<"transpose"> {
  let summary = "permutes dims: result dim i is input dim perm[i]";
  let arguments = (ins Kiln_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Kiln_GatherOp : Kiln_ComputeOp<"gather"> {
  let summary = "ONNX Gather: picks slices of `data` along `axis` by index";
  let description = [{
    Result shape: data[:axis] + indices.shape + data[axis+1:]. Negative
    indices count from the end; indices out of range are clamped.
  }];
  let arguments = (ins Kiln_Tensor:$data, Kiln_Tensor:$indices, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->`
    type($result)
  }];
}

def Kiln_ScatterOp : Kiln_ComputeOp<"scatter"> {
  let summary = "ONNX ScatterElements and ScatterND: `data` with `updates` written at `indices`";
  let description = [{
    mode "elements": update i (indices and updates have one shape, of
    data's rank) goes to i with i[axis] = indices[i]. mode "nd": indices
    [..., K] names K leading coordinates per update slice; updates have
    shape indices.shape[:-1] + data.shape[K:]. Negative indices count from
    the end. Updates land in index order, combined with what is there by
    `reduction` (none, add, mul, max, min): with none the last one wins.
    K follows from the ranks (updates rank = indices rank - 1 + data rank -
    K), so the last dim of indices may be dynamic.
  }];
  let arguments = (ins Kiln_Tensor:$data, Kiln_Tensor:$indices,
                       Kiln_Tensor:$updates, StrAttr:$mode, I64Attr:$axis,
                       StrAttr:$reduction);
  let results = (outs Kiln_Tensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $data `,` $indices `,` $updates attr-dict `:` type($data) `,`
    type($indices) `,` type($updates) `->` type($result)
  }];
}

def Kiln_GatherNDOp : Kiln_ComputeOp<"gather_nd"> {
  let summary = "ONNX GatherND: slices of `data` at the coordinates `indices` names";
  let description = [{
    indices [b..., m..., K]: the first `batch_dims` dims match data's; each
    index tuple names K (`tuple_length`, which a dynamic last dim of indices
    must hold at run time) coordinates after them. Result shape:
    indices.shape[:-1] + data.shape[batch_dims + K:]. Negative indices
    count from the end; indices out of range are clamped.
  }];
  let arguments = (ins Kiln_Tensor:$data, Kiln_Tensor:$indices,
                       I64Attr:$batch_dims, I64Attr:$tuple_length);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->`
    type($result)
  }];
}

def Kiln_ShapeOp : Kiln_ComputeOp<"shape"> {
  let summary = "dims [start, end) of the input as a 1-D i64 tensor (ONNX Shape)";
  let description = [{
    The dims are read at run time, so a symbolic dim becomes data. `start`
    and `end` are already clamped into [0, rank].
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$start, I64Attr:$end);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

// Ops whose result shapes come from data (a shape or axes given as a 1-D
// integer tensor, read at run time).

def Kiln_ExpandToOp : Kiln_ComputeOp<"expand_to"> {
  let summary = "broadcasts the input to the shape `shape` holds (ONNX Expand)";
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$shape);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $shape attr-dict `:` type($input) `,` type($shape) `->`
    type($result)
  }];
}

def Kiln_ConstantOfShapeOp : Kiln_ComputeOp<"constant_of_shape"> {
  let summary = "a tensor of the shape `shape` holds, filled with `value`";
  let arguments = (ins Kiln_Tensor:$shape, TypedAttrInterface:$value);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$shape attr-dict `:` type($shape) `->` type($result)";
}

def Kiln_ReshapeToOp : Kiln_ComputeOp<"reshape_to"> {
  let summary = "the input's elements in a shape described by data";
  let description = [{
    `mode` "reshape": `spec` holds the ONNX Reshape shape (0 copies the
    input's dim, -1 is inferred); "reshape_allowzero": the same with 0 a
    dim of size 0 (ONNX allowzero=1); "unsqueeze" / "squeeze": `spec` holds the
    axes to insert / remove (negative counts from the end); "flatten":
    `spec` holds the axis, the result is 2-D.
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$spec, StrAttr:$mode);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $spec attr-dict `:` type($input) `,` type($spec) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_PadOp : Kiln_ComputeOp<"pad", [AttrSizedOperandSegments]> {
  let summary = "ONNX Pad: pads (or crops, when negative) each dim";
  let description = [{
    `pads` holds the begin pads then the end pads of each dim, or of each
    of `axes` when given; `mode` is constant (with `value`, default 0),
    edge, reflect or wrap.
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$pads,
                       Optional<Kiln_Tensor>:$value,
                       Optional<Kiln_Tensor>:$axes, StrAttr:$mode);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $pads (`value` $value^)? (`axes` $axes^)? attr-dict `:`
    type(operands) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_SliceByOp : Kiln_ComputeOp<"slice_by", [AttrSizedOperandSegments]> {
  let summary = "ONNX Slice with starts, ends, axes and steps as data";
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$starts,
                       Kiln_Tensor:$ends, Optional<Kiln_Tensor>:$axes,
                       Optional<Kiln_Tensor>:$steps);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $starts `,` $ends (`axes` $axes^)? (`steps` $steps^)?
    attr-dict `:` type(operands) `->` type($result)
  }];
}

def Kiln_RangeOp : Kiln_ComputeOp<"range"> {
  let summary = "ONNX Range: start, start + delta, ... short of limit";
  let arguments = (ins Kiln_Tensor:$start, Kiln_Tensor:$limit,
                       Kiln_Tensor:$delta);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $start `,` $limit `,` $delta attr-dict `:` type(operands) `->`
    type($result)
  }];
}

def Kiln_ReduceByOp : Kiln_ComputeOp<"reduce_by"> {
  let summary = "sum, mean, max, min or prod over the axes `axes` holds";
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$axes, StrAttr:$kind,
                       BoolAttr:$keepdims);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $axes attr-dict `:` type($input) `,` type($axes) `->`
    type($result)
  }];
}

def Kiln_ResizeOp : Kiln_ComputeOp<"resize"> {
  let summary = "ONNX Resize along `axes`, its scales or sizes read at run time";
  let description = [{
    `spec` holds one scale (a float) per axis, or one output size (i64) when
    `sizes` is set; `roi` (start then end coordinates per axis) is read for
    coordinate_mode tf_crop_and_resize. The other attributes are ONNX's:
    mode (nearest, linear, cubic), coordinate_mode
    (coordinate_transformation_mode), nearest_mode, cubic_coeff_a,
    exclude_outside, extrapolation_value, antialias and aspect_policy
    (keep_aspect_ratio_policy). `shape` is the result's shape, -1 where it
    is known only at run time.
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$spec,
                       Optional<Kiln_Tensor>:$roi, DenseI64ArrayAttr:$axes,
                       BoolAttr:$sizes, StrAttr:$mode,
                       StrAttr:$coordinate_mode, StrAttr:$nearest_mode,
                       F64Attr:$cubic_coeff_a, BoolAttr:$exclude_outside,
                       F64Attr:$extrapolation_value, BoolAttr:$antialias,
                       StrAttr:$aspect_policy, DenseI64ArrayAttr:$shape);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $spec (`,` $roi^)? attr-dict `:` type(operands) `->`
    type($result)
  }];
}

def Kiln_GridSampleOp : Kiln_ComputeOp<"grid_sample"> {
  let summary = "ONNX GridSample: the input sampled at the grid's coordinates";
  let description = [{
    input [N, C, D1..Dk], grid [N, O1..Ok, k] holding normalized coordinates
    in [-1, 1], innermost axis first (x, y, ...); result [N, C, O1..Ok].
    `mode` nearest, linear or cubic; `padding_mode` zeros, border or
    reflection; `align_corners` as ONNX's.
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_Tensor:$grid, StrAttr:$mode,
                       StrAttr:$padding_mode, BoolAttr:$align_corners);
  let results = (outs Kiln_Tensor:$result);
  let hasVerifier = 1;
  let assemblyFormat = [{
    $input `,` $grid attr-dict `:` type($input) `,` type($grid) `->`
    type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def Kiln_KernelOp : Kiln_Op<"kernel", [
    IsolatedFromAbove, Kiln_SameDevice,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "one fused group: compiled to one kernel, nothing inside goes to memory";
  let description = [{
    Block arguments mirror the operands. Before kernel lowering the body holds
    graph ops on device-typed tensors; after, linalg/arith/math on plain
    tensors of the same shapes.
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs);
  let results = (outs Variadic<Kiln_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    (`(` $inputs^ `:` type($inputs) `)`)? `->` `(` type($results) `)`
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let skipDefaultBuilders = 1;
  let builders = [OpBuilder<(ins "::mlir::TypeRange":$resultTypes,
                                 "::mlir::ValueRange":$inputs)>];
}

def Kiln_YieldOp : Kiln_Op<"yield", [Pure, Terminator, ReturnLike,
                                    HasParent<"KernelOp">]> {
  let summary = "the values a kernel returns";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* nothing */ }]>];
}

#endif // KILN_OPS
