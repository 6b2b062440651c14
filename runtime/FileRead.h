//===- FileRead.h - whole files into memory (runtime-internal) ----*- C++
//-*-===//

#ifndef KILN_RUNTIME_FILEREAD_H
#define KILN_RUNTIME_FILEREAD_H

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

/// The bytes of `path`. Throws kiln::Error("<path>: <problem>") when it is a
/// folder or cannot be opened or read.
std::vector<uint8_t> readWholeFile(const std::string &path);

} // namespace kiln

#endif // KILN_RUNTIME_FILEREAD_H
