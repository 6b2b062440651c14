//===- CudaTestKernels.h - hand-written PTX for the CUDA tests ----*- C++
//-*-===//
//
// Kernels with kiln's CUDA ABI (docs/devices.md): one by-value parameter
// `struct KilnSlots { void *p[K]; }`, grid-stride loops over f32[1000].
// Their CPU twins are in CudaTestKernels.cpp; the fake driver
// (fakecuda/Driver.cpp) emulates them.
//
//   kiln_add_one  {x, y}     y = x + 1
//   kiln_add      {x, y, z}  z = x + y
//   kiln_twice    {x, y, t}  t = 2x   (t: a scratch slot)
//   kiln_plus_one {x, y, t}  y = t + 1
//
// Checked with `ptxas -arch=sm_80` and `-arch=sm_90`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TESTS_UNIT_CUDATESTKERNELS_H
#define KILN_TESTS_UNIT_CUDATESTKERNELS_H

#include "kiln/runtime.h"
#include "runtime/Artifact.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::test {

using nlohmann::json;

constexpr int kCudaTestN = 1000;
constexpr int N = kCudaTestN;
constexpr size_t kBytes = N * sizeof(float);

inline const char kCudaTestPtx[] = R"PTX(.version 7.0
.target sm_80
.address_size 64

// y[i] = x[i] + 1 for i < 1000; s.p = {x, y}
.visible .entry kiln_add_one(.param .align 8 .b8 s[16])
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [s];
  ld.param.u64 %rd2, [s+8];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  mov.u32 %r5, %nctaid.x;
  mul.lo.u32 %r5, %r5, %r2;
A_LOOP:
  setp.ge.u32 %p1, %r4, 1000;
  @%p1 bra A_DONE;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f2;
  add.u32 %r4, %r4, %r5;
  bra A_LOOP;
A_DONE:
  ret;
}

// t[i] = x[i] * 2 for i < 1000; s.p = {x, y, t}
.visible .entry kiln_twice(.param .align 8 .b8 s[24])
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [s];
  ld.param.u64 %rd2, [s+16];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  mov.u32 %r5, %nctaid.x;
  mul.lo.u32 %r5, %r5, %r2;
B_LOOP:
  setp.ge.u32 %p1, %r4, 1000;
  @%p1 bra B_DONE;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, %f1;
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f2;
  add.u32 %r4, %r4, %r5;
  bra B_LOOP;
B_DONE:
  ret;
}

// y[i] = t[i] + 1 for i < 1000; s.p = {x, y, t}
.visible .entry kiln_plus_one(.param .align 8 .b8 s[24])
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [s+16];
  ld.param.u64 %rd2, [s+8];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  mov.u32 %r5, %nctaid.x;
  mul.lo.u32 %r5, %r5, %r2;
C_LOOP:
  setp.ge.u32 %p1, %r4, 1000;
  @%p1 bra C_DONE;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.f32 %f2, %f1, 0f3F800000;
  add.s64 %rd5, %rd2, %rd3;
  st.global.f32 [%rd5], %f2;
  add.u32 %r4, %r4, %r5;
  bra C_LOOP;
C_DONE:
  ret;
}

// z[i] = x[i] + y[i] for i < 1000; s.p = {x, y, z}
.visible .entry kiln_add(.param .align 8 .b8 s[24])
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<9>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [s];
  ld.param.u64 %rd2, [s+8];
  ld.param.u64 %rd6, [s+16];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd6, %rd6;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mad.lo.u32 %r4, %r1, %r2, %r3;
  mov.u32 %r5, %nctaid.x;
  mul.lo.u32 %r5, %r5, %r2;
D_LOOP:
  setp.ge.u32 %p1, %r4, 1000;
  @%p1 bra D_DONE;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  add.s64 %rd5, %rd2, %rd3;
  ld.global.f32 %f2, [%rd5];
  add.f32 %f3, %f1, %f2;
  add.s64 %rd7, %rd6, %rd3;
  st.global.f32 [%rd7], %f3;
  add.u32 %r4, %r4, %r5;
  bra D_LOOP;
D_DONE:
  ret;
}
)PTX";

// Artifacts built from these kernels: manifests (docs/devices.md) whose
// kernel steps on cuda roles carry the launch descriptions below.

/// The "cuda" object of each test kernel.
inline json cudaFor(const std::string &kernel) {
  auto launch = [](const char *entry, uint64_t threads) {
    return json{{"entry", entry}, {"threads", threads}};
  };
  if (kernel == "k_add_one")
    return {{"slots", 2},
            {"scratch", json::array()},
            {"launches", {launch("kiln_add_one", N)}}};
  if (kernel == "k_add")
    return {{"slots", 3},
            {"scratch", json::array()},
            {"launches", {launch("kiln_add", N)}}};
  if (kernel == "k_twice_plus_one") // 300 threads: the grid-stride loop
    return {
        {"slots", 3},
        {"scratch", {kBytes}},
        {"launches", {launch("kiln_twice", 300), launch("kiln_plus_one", N)}}};
  if (kernel == "k_gemm") // see CudaTestKernels.cpp
    return {{"slots", 3},
            {"scratch", json::array()},
            {"launches",
             {{{"gemm",
                {{"dtype", "f32"},
                 {"batch", 2},
                 {"m", 10},
                 {"n", 25},
                 {"k", 20},
                 {"a", 0},
                 {"b", 1},
                 {"c", 2},
                 {"trans_a", false},
                 {"trans_b", true},
                 {"stride_a", 200},
                 {"stride_b", 0},
                 {"stride_c", 250},
                 {"beta", 0}}}}}}};
  if (kernel == "k_conv") // see CudaTestKernels.cpp; slot 3: the workspace
    return {{"slots", 4},
            {"scratch", {1024}},
            {"launches",
             {{{"conv",
                {{"dtype", "f32"},
                 {"x_shape", {2, 4, 10, 10}},
                 {"w_shape", {6, 2, 3, 3}},
                 {"y_shape", {2, 6, 5, 6}},
                 {"pads", {1, 0}},
                 {"strides", {2, 1}},
                 {"dilations", {1, 2}},
                 {"groups", 2},
                 {"beta", 0},
                 {"x", 0},
                 {"w", 1},
                 {"y", 2},
                 {"workspace", 3},
                 {"workspace_bytes", 1024}}}}}}};
  if (kernel == "k_conv_fused") { // k_conv, then + w[m] + x[i], ReLU
    json conv = cudaFor("k_conv");
    json &c = conv["launches"][0]["conv"];
    c["bias"] = 1;
    c["z"] = 0;
    c["activation"] = "relu";
    return conv;
  }
  return {{"slots", 2}, // k_fault {x, y}
          {"scratch", json::array()},
          {"launches", {launch("kiln_fault", N)}}};
}

struct PlanBuilder {
  json roles = json::array(), values = json::array(), inputs = json::array(),
       outputs = json::array(), steps = json::array();
  std::vector<char> weights;

  size_t role(const std::string &name) {
    std::string kind = name.substr(0, name.find(':'));
    roles.push_back({{"name", name}, {"kind", kind}});
    return roles.size() - 1;
  }
  size_t value(const std::string &kind, size_t role) {
    values.push_back(
        {{"dtype", "f32"}, {"shape", {N}}, {"kind", kind}, {"device", role}});
    return values.size() - 1;
  }
  size_t input(const std::string &name, size_t role) {
    size_t id = value("input", role);
    inputs.push_back({{"name", name}, {"value", id}});
    return id;
  }
  size_t constant(size_t role, const std::vector<float> &data) {
    size_t id = value("constant", role);
    size_t offset = (weights.size() + 63) / 64 * 64;
    weights.resize(offset + kBytes);
    std::memcpy(weights.data() + offset, data.data(), kBytes);
    values[id]["offset"] = offset;
    return id;
  }
  size_t kernel(const std::string &name, std::vector<size_t> in, size_t role) {
    size_t out = value("temp", role);
    json args = in;
    args.push_back(out);
    json step = {{"kernel", name},
                 {"args", args},
                 {"num_inputs", in.size()},
                 {"device", role}};
    if (roles[role]["kind"] == "cuda")
      step["cuda"] = cudaFor(name);
    steps.push_back(step);
    return out;
  }
  size_t copy(size_t src, size_t role) {
    size_t dst = value("temp", role);
    steps.push_back({{"copy", {src, dst}}, {"bytes", kBytes}});
    return dst;
  }
  void output(const std::string &name, size_t id) {
    outputs.push_back({{"name", name}, {"value", id}});
  }
  json manifest() const {
    json m;
    m["abi"] = 1;
    m["target"]["cpu_features"] = json::array();
    m["target"]["cuda_arch"] = "sm_80";
    m["devices"] = roles;
    m["values"] = values;
    m["inputs"] = inputs;
    m["outputs"] = outputs;
    m["steps"] = steps;
    return m;
  }
};

inline std::vector<float> weight() {
  std::vector<float> w(N);
  for (int i = 0; i < N; ++i)
    w[i] = 0.5f + 0.01f * float(i % 37);
  return w;
}

inline kiln::Tensor input(float seed) {
  kiln::Tensor t = kiln::Tensor::empty(kiln::DType::F32, {N});
  for (int i = 0; i < N; ++i)
    t.data<float>()[i] = std::sin(seed + 0.37f * float(i));
  return t;
}

/// A plan of one library launch, kernel(x, w), on `device`, with a constant
/// w[i] = ((i % period) - period / 2) / scale.
inline PlanBuilder libraryPlan(const std::string &kernel,
                               const std::string &device, int period,
                               float scale) {
  PlanBuilder b;
  size_t role = b.role(device);
  size_t x = b.input("x", role);
  std::vector<float> w(N);
  for (size_t i = 0; i < N; ++i)
    w[i] = float(int(i % period) - period / 2) / scale;
  size_t y = b.kernel(kernel, {x, b.constant(role, w)}, role);
  b.output("y", y);
  return b;
}
/// One GEMM launch (k_gemm), through cuBLAS on a cuda device.
inline PlanBuilder gemmPlan(const std::string &device) {
  return libraryPlan("k_gemm", device, 13, 8.0f);
}
/// One conv launch (k_conv), through cuDNN on a cuda device.
inline PlanBuilder convPlan(const std::string &device) {
  return libraryPlan("k_conv", device, 11, 4.0f);
}
/// One fused conv launch (k_conv_fused: bias, residual, ReLU) through
/// cuDNN on a cuda device.
inline PlanBuilder fusedConvPlan(const std::string &device) {
  return libraryPlan("k_conv_fused", device, 11, 4.0f);
}
/// The floats of y that k_gemm (y[2x10x25]) and k_conv (y[2x6x5x6]) write;
/// on a GPU the rest of y is left as it was.
constexpr size_t kGemmOutputs = 500, kConvOutputs = 360;

/// Runs `m` on `x` `runs` times against the artifact at `path` bound to the
/// cpu (the CPU twins): "" when the first `count` floats of output 0 agree
/// to 1e-4 (relative) every time, else the first difference.
inline std::string differsFromTwin(const std::string &path,
                                   const kiln::Module &m, const kiln::Tensor &x,
                                   size_t count, int runs = 2) {
  kiln::LoadOptions onCpu;
  onCpu.device = "cpu";
  std::vector<kiln::Tensor> want = kiln::Module::load(path, onCpu).run({x});
  const float *r = want[0].data<float>();
  for (int run = 0; run < runs; ++run) {
    std::vector<kiln::Tensor> got = m.run({x});
    const float *g = got[0].data<float>();
    for (size_t i = 0; i < count; ++i)
      if (!(std::fabs(g[i] - r[i]) <= 1e-4f * (1 + std::fabs(r[i]))))
        return "run " + std::to_string(run) + ": element " + std::to_string(i) +
               " is " + std::to_string(g[i]) + ", expected " +
               std::to_string(r[i]);
  }
  return "";
}

/// One role: c = twice_plus_one((x + 1) + w); outputs c, w, x.
inline PlanBuilder singlePlan(const std::string &device = "cuda:0") {
  PlanBuilder b;
  size_t gpu = b.role(device);
  size_t x = b.input("x", gpu);
  size_t w = b.constant(gpu, weight());
  size_t a = b.kernel("k_add_one", {x}, gpu);
  size_t c =
      b.kernel("k_twice_plus_one", {b.kernel("k_add", {a, w}, gpu)}, gpu);
  b.output("c", c);
  b.output("w", w);
  b.output("x", x);
  return b;
}

inline std::vector<std::vector<float>> singleReference(const kiln::Tensor &x) {
  std::vector<float> w = weight();
  std::vector<std::vector<float>> r(3, std::vector<float>(N));
  for (int i = 0; i < N; ++i) {
    float b = (x.data<float>()[i] + 1.0f) + w[i];
    r[0][i] = (b + b) + 1.0f;
    r[1][i] = w[i];
    r[2][i] = x.data<float>()[i];
  }
  return r;
}

/// cpu, cuda:0, cuda:1: a = x + 1 (cpu), b = a + w (role 1),
/// c = twice_plus_one(b) (role 2), out = c + 1 (cpu); outputs out, c, b.
inline PlanBuilder multiPlan() {
  PlanBuilder b;
  size_t cpu = b.role("cpu"), g0 = b.role("cuda:0"), g1 = b.role("cuda:1");
  size_t x = b.input("x", cpu);
  size_t w = b.constant(g0, weight());
  size_t a = b.copy(b.kernel("k_add_one", {x}, cpu), g0);
  size_t sum = b.kernel("k_add", {a, w}, g0);
  size_t c = b.kernel("k_twice_plus_one", {b.copy(sum, g1)}, g1);
  b.output("out", b.kernel("k_add_one", {b.copy(c, cpu)}, cpu));
  b.output("c", c);
  b.output("b", sum);
  return b;
}

inline std::vector<std::vector<float>> multiReference(const kiln::Tensor &x) {
  std::vector<float> w = weight();
  std::vector<std::vector<float>> r(3, std::vector<float>(N));
  for (int i = 0; i < N; ++i) {
    float b = (x.data<float>()[i] + 1.0f) + w[i];
    float c = (b + b) + 1.0f;
    r[0][i] = c + 1.0f;
    r[1][i] = c;
    r[2][i] = b;
  }
  return r;
}

/// The bytes of an artifact with `code` (the CPU kernels), the plan's
/// weights and, when not empty, `ptx`.
inline std::vector<char> artifactBytes(const json &manifest,
                                       const std::vector<char> &code,
                                       const std::vector<char> &weights,
                                       const std::string &ptx) {
  std::vector<artifact::Section> sections = {{"code", code},
                                             {"weights", weights}};
  if (!ptx.empty())
    sections.push_back({"ptx", std::vector<char>(ptx.begin(), ptx.end())});
  return artifact::write(manifest, sections);
}

} // namespace kiln::test

#endif // KILN_TESTS_UNIT_CUDATESTKERNELS_H
