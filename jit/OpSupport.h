//===- OpSupport.h - what the tracer's ops share (internal) -------*- C++
//-*-===//

#ifndef KILN_JIT_OPSUPPORT_H
#define KILN_JIT_OPSUPPORT_H

#include "jit/Trace.h"

namespace kiln::detail {

/// 0 bool, 1 integers, 2 floats: the kinds torch.result_type ranks.
int kindOf(DType t);
bool isFloat(DType t);
/// torch.result_type of two dtypes of tensors with dims.
DType promote(DType a, DType b);
/// torch.result_type of two proxies: a zero-dim one (or a number) decides
/// the dtype only when its kind (bool < integer < float) is higher.
DType resultType(const Proxy &a, const Proxy &b);
Graph &graphOf(const Proxy &p);
const Graph::Value &val(const Proxy &p);
/// "f32[N,4]".
std::string shapeText(const Proxy &p);
/// Throws kiln::Error("op: message").
[[noreturn]] void fail(const std::string &op, const std::string &message);
/// `d` in [-rank, rank) made non-negative, or an error naming `op`.
int64_t axis(const std::string &op, int64_t d, int64_t rank);
void setInts(onnx::NodeProto &n, const std::string &name,
             const std::vector<int64_t> &values);
void setInt(onnx::NodeProto &n, const std::string &name, int64_t v);
void setFloat(onnx::NodeProto &n, const std::string &name, double v);
/// numpy broadcasting of two shapes; a symbol meets 1 or itself.
std::vector<Dim> broadcast(const std::string &op, const std::vector<Dim> &a,
                           const std::vector<Dim> &b);
/// `p` as `dtype`: its ONNX name, through a Cast when the dtype differs.
std::string castTo(const Proxy &p, DType dtype);
/// The one trace `a` and `b` belong to.
Graph &same(const Proxy &a, const Proxy &b);
/// The dtype a C++ number (standing for a Python scalar) gives beside a
/// tensor of `t`.
DType scalarType(DType t, double v);
/// One entry of a reshape target: a size, or dim `index` of ONNX value
/// `source` read at run time.
struct Piece {
  int64_t size;
  std::string source;
  int64_t index = 0;
};
/// Reshape of `x` to `pieces` (Shape -> Gather -> Concat where a piece is
/// read at run time), typed `shape`.
Proxy reshapeTo(const Proxy &x, const std::vector<Piece> &pieces,
                std::vector<Dim> shape);
/// The static element count of `dims`, or -1.
int64_t staticCount(const std::vector<Dim> &dims);

} // namespace kiln::detail

#endif // KILN_JIT_OPSUPPORT_H
