//===- FuzzCommon.h - shared pieces of the libFuzzer harnesses ----*- C++
//-*-===//
//
// The runtime's readers take a path, not bytes (they are what kiln-run and
// load_safetensors call). A harness therefore writes each input into an
// in-memory file (memfd) and hands the reader its /proc/self/fd path: no
// disk I/O, and the reader runs exactly as it does on a real file.
//
// Every reader must either return or throw kiln::Error. Any other exception
// escaping is a bug (the CLI would print an unhelpful message, or
// std::terminate), so the harnesses let it escape: libFuzzer reports an
// uncaught exception as a crash ("deadly signal" via std::terminate).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TESTS_LIBFUZZER_FUZZCOMMON_H
#define KILN_TESTS_LIBFUZZER_FUZZCOMMON_H

#include "kiln/runtime.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln::fuzz {

/// An in-memory file whose contents are replaced by each input.
class MemFile {
public:
  explicit MemFile(const char *name) {
    fd_ = memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;
  ~MemFile() { close(fd_); }

  /// Replaces the file's contents with `size` bytes at `data`.
  void assign(const uint8_t *data, size_t size) {
    if (ftruncate(fd_, 0) != 0) {
      std::perror("ftruncate");
      std::abort();
    }
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd_, data + done, size - done, done);
      if (n <= 0) {
        std::perror("pwrite");
        std::abort();
      }
      done += static_cast<size_t>(n);
    }
  }
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

/// A path for a file the harness writes with the runtime's writers. Some
/// write beside the target and rename (save_safetensors), which a memfd
/// path cannot take, so this is a real file in a private folder under
/// $TMPDIR (default /tmp), removed when the process exits.
inline std::string outputPath(const std::string &name) {
  static std::string folder = [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-libfuzzer-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string removeAtExit = pattern;
    std::atexit([] {
      std::string command = "rm -rf '" + removeAtExit + "'";
      if (std::system(command.c_str()) != 0)
        std::fprintf(stderr, "cannot remove %s\n", removeAtExit.c_str());
    });
    return pattern;
  }();
  return folder + "/" + name;
}

/// Aborts with a message: an invariant the harness checks (a round trip,
/// say) does not hold. libFuzzer saves the input as a crash.
[[noreturn]] inline void invariant(const std::string &message) {
  std::fprintf(stderr, "kiln fuzz invariant violated: %s\n", message.c_str());
  std::abort();
}

/// Whether two host tensors have the same dtype, shape and bytes.
inline bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0);
}

} // namespace kiln::fuzz

#endif // KILN_TESTS_LIBFUZZER_FUZZCOMMON_H
