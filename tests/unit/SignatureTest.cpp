//===- SignatureTest.cpp - SHA-256, HMAC and signed loading ---------------===//

#include "runtime/Signature.h"

#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;

namespace {
std::string sha(const std::string &s) {
  return signature::hex(signature::sha256(s.data(), s.size()));
}

std::string hmac(const std::string &key, const std::string &s) {
  return signature::hex(signature::hmacSha256(key, s.data(), s.size()));
}
} // namespace

// FIPS 180-4's examples, and lengths around the 55/56/64-byte padding edges
// against values from Python's hashlib.
TEST(SignatureTest, Sha256MatchesTheStandardsVectors) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
                     "7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410f"
                        "f61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha(std::string(55, 'x')),
            "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  EXPECT_EQ(sha(std::string(56, 'x')),
            "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  EXPECT_EQ(sha(std::string(64, 'x')),
            "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  EXPECT_EQ(sha(std::string(119, 'x')),
            "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c");
}

// RFC 4231's test cases 1, 2, 4 and 6 (a key longer than the block).
TEST(SignatureTest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  std::string key4;
  for (int i = 1; i <= 25; ++i)
    key4 += static_cast<char>(i);
  EXPECT_EQ(hmac(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  EXPECT_EQ(hmac(std::string(131, '\xaa'),
                 "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(SignatureTest, VerifyRejectsOtherKeysAndChangedBytes) {
  std::string key = "0123456789abcdef0123", data = "artifact bytes";
  std::string sig = signature::sign(key, data.data(), data.size());
  EXPECT_NO_THROW(
      signature::verify(key, sig, data.data(), data.size(), "a.kiln"));
  EXPECT_THROW(
      signature::verify(key + "x", sig, data.data(), data.size(), "a.kiln"),
      Error);
  std::string changed = data;
  changed[3] ^= 1;
  EXPECT_THROW(
      signature::verify(key, sig, changed.data(), changed.size(), "a.kiln"),
      Error);
  EXPECT_THROW(signature::verify(key, "kiln-hmac-sha256 00", data.data(),
                                 data.size(), "a.kiln"),
               Error);
}

// The signature is checked before the bytes are parsed, so nothing of an
// artifact signed with another key is read, let alone loaded.
TEST(SignatureTest, LoadChecksTheSignatureFirst) {
  std::string bytes = "not an artifact at all";
  LoadOptions options;
  options.signingKey = "0123456789abcdef0123";
  options.signature =
      signature::sign("another key of 20 bytes", bytes.data(), bytes.size());
  try {
    Module::fromBytes(bytes.data(), bytes.size(), options, "x.kiln");
    FAIL() << "loaded with a wrong signature";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("signature mismatch"),
              std::string::npos)
        << e.what();
  }
  options.signature =
      signature::sign(options.signingKey, bytes.data(), bytes.size());
  try {
    Module::fromBytes(bytes.data(), bytes.size(), options, "x.kiln");
    FAIL() << "loaded garbage";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos)
        << e.what();
  }
  options.signature.clear();
  EXPECT_THROW(Module::fromBytes(bytes.data(), bytes.size(), options), Error);
}
