// Trace: the -v channel.
#include "util/trace.hpp"

namespace nxlock::util {

namespace {
TraceSink& sink() {
  static TraceSink s_sink;
  return s_sink;
}
}  // namespace

void set_trace_sink(TraceSink new_sink) { sink() = std::move(new_sink); }

bool tracing() { return static_cast<bool>(sink()); }

void trace(std::string_view line) {
  if (sink()) {
    sink()(line);
  }
}

}  // namespace nxlock::util
