//===- Tuning.h - packed weights of the C++ kernels -------------*- C++ -*-===//
//
// What kiln-pack-weights adds to a cpu (or sim) kernel and the C++ emitter
// reads back: the attributes naming a GEMM's packed B or a conv's Winograd
// weights, and the panel sizes (codegen/cpu/prelude/Sgemm.h streams them).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CODEGEN_CPU_TUNING_H
#define KILN_CODEGEN_CPU_TUNING_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace kiln {

/// An integer attribute on a kernel-level linalg.generic that is a CPU GEMM
/// (codegen/Gemm.h): the number of the kernel input that holds its constant
/// B packed as [ceil(N / kPackedColumns)][K][kPackedColumns] panels,
/// zero-padded past N (kiln-pack-weights). The C++ kernel streams the panels
/// when M is at most kPackedRows (on CPUs with AVX-512, at most 16: there
/// oneDNN's sgemm runs in vectors of 16, the panels in vectors of 8).
inline constexpr llvm::StringLiteral kPackedB = "kiln.packed_b";
inline constexpr int64_t kPackedColumns = 16;
inline constexpr int64_t kPackedRows = 256;

/// An integer attribute on a kernel-level linalg.generic that is a 3x3
/// conv codegen/Gemm.h's matchWinograd accepts: the number of the kernel
/// input that holds its constant weight transformed for Winograd F(2x2,
/// 3x3), U[16][M][C] = (G w G^T) per (m, c), 16 = the 4x4 tile
/// (kiln-pack-weights). The C++ kernel then runs the conv as 16 GEMMs
/// between input and output transforms of 4x4 tiles.
inline constexpr llvm::StringLiteral kWinogradU = "kiln.winograd_u";

/// An integer attribute on a kernel-level linalg.generic that is a conv in
/// groups codegen/Gemm.h's matchRowsConv accepts: the number of the kernel
/// input that holds its constant weight w[M][C][kh][kw] packed per group as
/// [groups][ceil(M / groups / kPackedColumns)][C * kh * kw][kPackedColumns]
/// (the group's output channels in blocks of kPackedColumns, tap by tap,
/// zero-padded past the group's last), which kiln_conv_flat reads its
/// weight vectors from.
inline constexpr llvm::StringLiteral kGroupedPanels = "kiln.grouped_panels";

} // namespace kiln

#endif // KILN_CODEGEN_CPU_TUNING_H
