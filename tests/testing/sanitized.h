// What a sanitized build (make asan, make tsan) leaves to the normal one (make test).
#pragma once

#include <gtest/gtest.h>

namespace arbiter::testing {

// True in a build with ARBITER_SANITIZE set.
#if defined(ARBITER_SANITIZED) && ARBITER_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace arbiter::testing

// Skips the test in a sanitized build, saying why. For the tests that assert a policy's figures
// over a whole trace, a minute or more each under AddressSanitizer: `make test` asserts the
// figures, and the sanitizers look for memory errors, races and undefined behaviour in the same
// code, which the shorter tests run there too (CONTRIBUTING.md, "The checks").
#define ARBITER_SKIP_WHEN_SANITIZED(why)                       \
  do {                                                         \
    if (::arbiter::testing::kSanitized) GTEST_SKIP() << (why); \
  } while (false)
