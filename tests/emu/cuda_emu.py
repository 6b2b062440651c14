"""Runs kiln's generated CUDA kernels on the host, for CI without a GPU.

build() compiles the CUDA source kilnc writes (--save-cuda, --emit=cuda) as C++ with
kiln_cuda_emu.h force-included, plus one trampoline per __global__ function;
environment() points kiln-run at the fake CUDA driver, cuBLAS and cuDNN
(tests/unit/fakecuda/Driver.cpp), whose cuLaunchKernel then runs those trampolines
(FAKE_CUDA_KERNELS). An artifact compiled for cuda:0 thus runs its real
launch sequence -- slots, scratch, phases, library calls, copies -- with
every generated kernel executed, thread by thread, on the CPU.
"""

import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

# extern "C" __global__ void __launch_bounds__(256) kiln_k0_p1(kiln_k0_slots s) {
_ENTRY = re.compile(r'extern "C" __global__ void __launch_bounds__\(\d+\) '
                    r'(\w+)\((\w+) s\) \{')
_SYNCS = ("__syncthreads", "__shfl")


def trampolines(source):
    """C++ for every kernel of `source`: NAME_emu runs the grid, NAME_emu_slots
    exposes its slot pointers to the fake driver's checks."""
    found = list(_ENTRY.finditer(source))
    out = ["\n// cuda_emu.py: trampolines for the fake driver\n"]
    for n, m in enumerate(found):
        name, slots = m.group(1), m.group(2)
        end = found[n + 1].start() if n + 1 < len(found) else len(source)
        sync = "true" if any(s in source[m.end():end] for s in _SYNCS) else "false"
        out.append(
            'extern "C" void %(n)s_emu(void **params, unsigned blocks, '
            'unsigned threads) {\n'
            '  %(s)s s = *static_cast<%(s)s *>(params[0]);\n'
            '  kiln_emu::launch(blocks, threads, %(y)s, '
            '[](void *p) { %(n)s(*static_cast<%(s)s *>(p)); }, &s);\n}\n'
            'extern "C" unsigned %(n)s_emu_slots(void **params, void *const **p) {\n'
            '  *p = static_cast<%(s)s *>(params[0])->p;\n'
            '  return sizeof(%(s)s) / sizeof(void *);\n}\n'
            % dict(n=name, s=slots, y=sync))
    return "".join(out), len(found)


def build(cu_path, so_path, cxx=None, timeout=600):
    """Compiles `cu_path` for the host into `so_path`; None, or why not."""
    with open(cu_path) as f:
        source = f.read()
    extra, count = trampolines(source)
    if count == 0 and "__global__" in source:
        return "cuda_emu: no kernel entry of the expected form in %s" % cu_path
    host = os.path.splitext(so_path)[0] + ".cpp"
    with open(host, "w") as f:
        f.write(source + extra)
    argv = [cxx or os.environ.get("CXX") or "g++", "-std=c++17", "-O1", "-g0",
            "-fPIC", "-shared", "-w", "-I", HERE, "-include",
            os.path.join(HERE, "kiln_cuda_emu.h"), "-x", "c++", host,
            "-o", so_path]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return "cuda_emu: the host compiler failed on %s:\n%s" % (host, proc.stderr[-3000:])
    return None


def environment(bin_dir, so_path, base=None):
    """The environment that makes kiln-run use the fake driver, cuBLAS and
    cuDNN, with the kernels of `so_path`."""
    env = dict(os.environ if base is None else base)
    fake = os.path.join(bin_dir, "libkiln-fake-cuda.so")
    env.update(KILN_CUDA_DRIVER=fake, KILN_CUBLAS=fake, KILN_CUDNN=fake,
               FAKE_CUDA_KERNELS=os.path.abspath(so_path))
    env.setdefault("FAKE_CUDA_MEMORY", str(8 << 30))
    return env
