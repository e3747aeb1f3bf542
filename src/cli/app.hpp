// The nxlock command line: parse, dispatch, and turn every outcome into an exit status.
#pragma once

namespace nxlock::cli {

// Runs nxlock with the given arguments; returns the process exit status.
int run(int argc, char** argv);

}  // namespace nxlock::cli
