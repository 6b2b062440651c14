//===- Signature.cpp - keyed MACs over artifacts --------------------------===//

#include "runtime/Signature.h"

#include "kiln/runtime.h"

#include <cstring>

namespace kiln::signature {

namespace {
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr const char *kScheme = "kiln-hmac-sha256";

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// The streaming state of one SHA-256: whole 64-byte blocks go straight
// through, the tail waits in `block`.
class Sha256 {
public:
  void update(const uint8_t *p, size_t n) {
    length += n;
    if (used) {
      size_t take = std::min(n, sizeof(block) - used);
      std::memcpy(block + used, p, take);
      used += take, p += take, n -= take;
      if (used < sizeof(block))
        return;
      compress(block);
      used = 0;
    }
    for (; n >= 64; n -= 64, p += 64)
      compress(p);
    std::memcpy(block, p, n);
    used = n;
  }

  Digest finish() {
    uint64_t bits = length * 8;
    uint8_t pad[72] = {0x80};
    size_t padding = (used < 56 ? 56 : 120) - used;
    for (int i = 0; i < 8; ++i)
      pad[padding + i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(pad, padding + 8);
    Digest out;
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 4; ++k)
        out[4 * i + k] = static_cast<uint8_t>(state[i] >> (24 - 8 * k));
    return out;
  }

private:
  void compress(const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 |
             uint32_t(p[4 * i + 2]) << 8 | uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3],
             e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) +
                    ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) +
                    ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    uint32_t add[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i)
      state[i] += add[i];
  }

  uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block[64] = {};
  size_t used = 0;
  uint64_t length = 0;
};

} // namespace

std::string hex(const Digest &d) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

Digest sha256(const void *data, size_t size) {
  Sha256 h;
  h.update(static_cast<const uint8_t *>(data), size);
  return h.finish();
}

Digest hmacSha256(const std::string &key, const void *data, size_t size) {
  uint8_t padded[64] = {};
  if (key.size() > sizeof(padded)) {
    Digest short_ = sha256(key.data(), key.size());
    std::memcpy(padded, short_.data(), short_.size());
  } else {
    std::memcpy(padded, key.data(), key.size());
  }
  uint8_t inner[64], outer[64];
  for (int i = 0; i < 64; ++i) {
    inner[i] = padded[i] ^ 0x36;
    outer[i] = padded[i] ^ 0x5c;
  }
  Sha256 in;
  in.update(inner, sizeof(inner));
  in.update(static_cast<const uint8_t *>(data), size);
  Digest innerDigest = in.finish();
  Sha256 out;
  out.update(outer, sizeof(outer));
  out.update(innerDigest.data(), innerDigest.size());
  return out.finish();
}

std::string sign(const std::string &key, const void *data, size_t size) {
  return std::string(kScheme) + " " + hex(hmacSha256(key, data, size)) + "\n";
}

void verify(const std::string &key, const std::string &sigText,
            const void *data, size_t size, const std::string &what) {
  if (key.empty())
    throw Error(what + ": the signing key is empty");
  std::string text = sigText;
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  std::string prefix = std::string(kScheme) + " ";
  if (text.compare(0, prefix.size(), prefix) != 0 ||
      text.size() != prefix.size() + 64)
    throw Error(what + ": the signature is not a " + kScheme +
                " line (scheme, space, 64 hex digits)");
  std::string want = hex(hmacSha256(key, data, size));
  // Every byte compared, so the time taken says nothing of where they
  // differ.
  unsigned diff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned>(want[i] ^ text[prefix.size() + i]);
  if (diff)
    throw Error(what + ": signature mismatch: the artifact was not signed "
                       "with this key, or was changed after signing");
}

} // namespace kiln::signature
