//===- Signature.h - keyed MACs over artifacts ------------------*- C++ -*-===//
//
// Loading an artifact runs its code, and its CRC-32s catch corruption, not
// tampering. A signed artifact carries, beside it in NAME.sig, an
// HMAC-SHA256 of its bytes under a secret key: whoever holds the key can
// check that the artifact is one the key's holder wrote, before any of its
// code is loaded. A MAC is symmetric (the key that checks can also sign),
// which suits one party building and deploying its own models; it needs no
// library the small runtime does not already carry.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_SIGNATURE_H
#define KILN_RUNTIME_SIGNATURE_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::signature {

using Digest = std::array<uint8_t, 32>;

/// SHA-256 (FIPS 180-4) of `size` bytes at `data`.
Digest sha256(const void *data, size_t size);

/// `d` in lower-case hex.
std::string hex(const Digest &d);

/// HMAC-SHA256 (RFC 2104) of the message under `key`.
Digest hmacSha256(const std::string &key, const void *data, size_t size);

/// The text of a .sig file for an artifact: the scheme, then the MAC in
/// hex, on one line.
std::string sign(const std::string &key, const void *data, size_t size);

/// Throws kiln::Error unless `sigText` (a .sig file's text) is a MAC of the
/// artifact under `key`; `what` names the artifact in the message.
void verify(const std::string &key, const std::string &sigText,
            const void *data, size_t size, const std::string &what);

/// The file holding the signature of the artifact at `path`.
inline std::string sigPath(const std::string &path) { return path + ".sig"; }

} // namespace kiln::signature

#endif // KILN_RUNTIME_SIGNATURE_H
