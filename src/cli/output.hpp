// Output: what a command says, as text lines or one JSON object (--json).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace nxlock::cli {

class Output {
 public:
  bool json = false;
  int json_fd = -1;  // --json-fd: where the JSON object goes; negative: stdout
  bool quiet = false;

  // A line of text for stdout (ignored under --json, which uses fields instead).
  void line(std::string_view text);
  // A field of the JSON object (ignored without --json).
  template <typename T>
  void field(const std::string& name, T&& value) {
    if (json) {
      m_object[name] = std::forward<T>(value);
    }
  }
  // A field holding arbitrary bytes: a string when valid UTF-8, else "<name>_hex".
  void bytes_field(const std::string& name, std::string_view bytes);
  // The same field in `object` (an element of an array field).
  static void bytes_into(nlohmann::json& object, const std::string& name, std::string_view bytes);
  // A note for stderr (the busy explanation, a lost lock): suppressed by -q.
  void note(std::string_view text) const;
  // A warning for stderr that -q does not silence (a lost lock).
  void warn(std::string_view text) const;
  // The one-line error: `nxlock: <what>: <why>` on stderr, and in JSON when asked.
  void error(int status, std::string_view what, std::string_view why);

  // Writes stdout: the text lines, or the JSON object with "exit_status"
  // (to json_fd instead, if set).
  void flush(int status);

 private:
  std::string m_text;
  nlohmann::json m_object = nlohmann::json::object();
};

}  // namespace nxlock::cli
