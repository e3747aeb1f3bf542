// nxlock's entry point: everything else is the nxlock_core library.
#include "cli/app.hpp"

int main(int argc, char** argv) { return nxlock::cli::run(argc, argv); }
