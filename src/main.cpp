// nxlock's entry point: everything else is the nxlock_core library.
#include <cstdio>

#include "cli/app.hpp"
#include "util/process.hpp"

int main(int argc, char** argv) {
  // Before anything opens a descriptor: see fill_standard_descriptors().
  if (!nxlock::util::fill_standard_descriptors()) {
    std::fputs("nxlock: /dev/null: cannot open it to stand in for a closed stdin/stdout/stderr\n",
               stderr);
    return 70;  // EX_SOFTWARE: EXIT STATUS has no status of its own for this
  }
  return nxlock::cli::run(argc, argv);
}
