// The few cryptographic pieces the control plane needs, over OpenSSL's libcrypto (Debian's
// libssl-dev): SHA-256 for stored token digests, HMAC-SHA-256 for the credentials the server
// issues to nodes, random secrets, and a comparison whose time does not depend on where two
// secrets differ.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace arbiter::crypto {

// The SHA-256 digest of `data`, as 64 lower-case hex digits.
std::string Sha256Hex(std::string_view data);

// HMAC-SHA-256 of `message` under `key`, as 64 lower-case hex digits.
std::string HmacSha256Hex(std::string_view key, std::string_view message);

// `bytes` random bytes from the operating system's generator, as 2 x bytes hex digits. Empty
// when the generator fails (never silently weak).
std::string RandomHex(std::size_t bytes);

// Whether a and b are equal, in a time that depends on their lengths only.
bool EqualConstantTime(std::string_view a, std::string_view b);

// Whether `text` is 64 hex digits (a SHA-256 digest as Sha256Hex writes it, any case).
bool IsSha256Hex(std::string_view text);

}  // namespace arbiter::crypto
