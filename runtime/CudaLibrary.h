//===- CudaLibrary.h - loading a CUDA library once per process ----*- C++
//-*-===//
//
// cuBLAS and cuDNN are dlopen'ed the same way: on first use, from the path an
// environment variable names, else from the toolkit (openToolkitLibrary);
// once per value of that variable (tests point it at different libraries),
// remembering a failure as well as a success.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CUDALIBRARY_H
#define KILN_RUNTIME_CUDALIBRARY_H

#include "runtime/Cuda.h"

#include "kiln/runtime.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::cuda {

/// Resolves the functions of a dlopen'ed library by name, keeping the first
/// error: "PATH is no KIND: it lacks NAME".
struct Symbols {
  void *library;
  std::string path, kind, error;
  template <typename F>
  void operator()(F &fn, const char *name, bool required = true) {
    fn = reinterpret_cast<F>(dlsym(library, name));
    if (!fn && required && error.empty())
      error = path + " is no " + kind + ": it lacks " + name;
  }
};

/// Library L (a struct of function pointers with a `path`) for the current
/// value of $`env`: loaded by the first call for that value, with
/// `resolve(L &, Symbols &)` filling its functions; throws kiln::Error with
/// "cannot load KIND for PURPOSE (tried ...; HINT)" or a missing symbol.
template <typename L, typename Resolve>
const L &loadLibraryOnce(const char *env, const std::vector<std::string> &names,
                         const std::string &kind, const std::string &purpose,
                         const std::string &hint, Resolve resolve) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<L>> loaded;
  static std::map<std::string, std::string> errors;
  const char *override = std::getenv(env);
  std::string key = override ? override : "";
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(key); it != loaded.end())
    return *it->second;
  if (auto it = errors.find(key); it != errors.end())
    throw Error(it->second);
  std::string &error = errors[key];
  if (key == "none") {
    error = kind + " is turned off (" + env + "=none)";
    throw Error(error);
  }
  std::string tried;
  void *library = openToolkitLibrary(key, names, tried);
  if (!library) {
    error = "cannot load " + kind + " for " + purpose + " (tried " + tried +
            "; " + hint + ")";
    throw Error(error);
  }
  auto l = std::make_unique<L>();
  l->path = tried;
  Symbols symbols{library, tried, kind, ""};
  resolve(*l, symbols);
  if (!symbols.error.empty()) {
    error = symbols.error;
    throw Error(error);
  }
  errors.erase(key);
  return *(loaded[key] = std::move(l));
}

} // namespace kiln::cuda

#endif // KILN_RUNTIME_CUDALIBRARY_H
