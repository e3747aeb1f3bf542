// CLI11, without <iostream>'s start-up cost in every translation unit that includes it.
//
// With GCC 12's libstdc++, each translation unit that includes <iostream> gets
// a static std::ios_base::Init, and the first one builds the standard streams
// and the classic locale at start-up (BENCHMARKS.md, "The command line's
// start-up"), spent even when nothing prints through a
// stream. nxlock writes with stdio; only CLI11 uses std::cout and std::cerr
// (App::exit(), for --help and --version, and deprecation warnings), and only
// inside parse_with_cli11(), which constructs an ios_base::Init first.
//
// So here <iostream> is declared, not included: its include guard is set and
// the four narrow stream objects declared as <iostream> declares them. Code
// that includes this header must not use std::cin/cout/cerr/clog outside
// parse_with_cli11() (any translation unit that includes <iostream> itself
// first, such as a GoogleTest one, gets the usual initialisation).
#pragma once

#include <version>  // defines __GLIBCXX__ for libstdc++

#if defined(__GLIBCXX__)
#include <istream>
#include <ostream>
#ifndef _GLIBCXX_IOSTREAM
#define _GLIBCXX_IOSTREAM 1
// As <iostream> declares them.
// clang-format off
namespace std _GLIBCXX_VISIBILITY(default) {
_GLIBCXX_BEGIN_NAMESPACE_VERSION
extern istream cin;
extern ostream cout;
extern ostream cerr;
extern ostream clog;
_GLIBCXX_END_NAMESPACE_VERSION
}  // namespace std
// clang-format on
#endif
#endif

#include <CLI/CLI.hpp>
