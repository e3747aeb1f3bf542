// Process helpers: a process's command line, signal names.
#pragma once

#include <string>
#include <sys/types.h>

namespace nxlock::util {

// The command line of process `pid` with arguments joined by spaces (from
// /proc), shortened to `max_length`; empty if it cannot be read.
std::string process_command_line(pid_t pid, std::size_t max_length = 200);

// Opens /dev/null on each of descriptors 0, 1 and 2 that is closed, so that no
// socket or file opened later lands there: output meant for a closed stdout
// would otherwise go into it (a Redis connection would run it as a command).
// Call first thing in main. Returns false if /dev/null could not be opened.
bool fill_standard_descriptors();

// Closes every descriptor but `a`, `b` and `c` (in a child just forked, which
// must hold nothing of its parent's: a lock file's, a store's sockets).
void close_all_but(int a, int b, int c);

// "SIGTERM" for 15; "signal N" for numbers without a name.
std::string signal_name(int signo);

}  // namespace nxlock::util
