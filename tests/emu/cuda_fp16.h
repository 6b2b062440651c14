// The host's stand-in for CUDA's cuda_fp16.h (tests/emu/kiln_cuda_emu.h):
// kiln's kernels only convert __half to and from float, which _Float16 does.
#ifndef KILN_EMU_CUDA_FP16_H
#define KILN_EMU_CUDA_FP16_H
typedef _Float16 __half;
#endif
