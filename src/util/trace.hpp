// Trace: the -v channel. Lower layers describe their steps; the CLI decides where they go.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace nxlock::util {

using TraceSink = std::function<void(std::string_view)>;

// Installs the sink that receives trace lines; an empty sink turns tracing off.
void set_trace_sink(TraceSink sink);

// True when someone listens, so callers can skip building trace strings.
bool tracing();

// Sends one line (without newline) to the sink, if any.
void trace(std::string_view line);

// Keys, values and replies in traces (and the messages that quote a backend's
// step) are cut after this many bytes (util::escape's max_bytes).
inline constexpr std::size_t k_trace_bytes = 120;

}  // namespace nxlock::util
