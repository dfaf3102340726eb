// The version of this build of Arbiter: the project's version (CMakeLists.txt), and, for a build
// from a git checkout, "+g" and the commit, with ".dirty" for uncommitted changes (for example
// "0.9.0+g79b6785ac2e1"). Written at build time by cmake/version.cmake.
#pragma once

namespace arbiter {

const char* Version();

}  // namespace arbiter
