// Output: text lines or one JSON object.
#include "cli/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace nxlock::cli {

namespace {
void write_all(std::FILE* stream, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stream);
}

// To a descriptor of the caller's (--json-fd), unbuffered: it may be a pipe.
void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return;  // a reader gone away: nothing else to tell it
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string to_hex(std::string_view bytes) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const unsigned char c : bytes) {
    hex += k_digits[c >> 4];
    hex += k_digits[c & 15];
  }
  return hex;
}
}  // namespace

void Output::line(std::string_view text) {
  m_text.append(text);
  m_text.push_back('\n');
}

void Output::bytes_field(const std::string& name, std::string_view bytes) {
  if (json) {
    bytes_into(m_object, name, bytes);
  }
}

void Output::bytes_into(nlohmann::json& object, const std::string& name, std::string_view bytes) {
  try {
    // dump() is what rejects invalid UTF-8; probe once, then store.
    (void)nlohmann::json(std::string(bytes)).dump();
    object[name] = std::string(bytes);
  } catch (const nlohmann::json::type_error&) {
    object[name + "_hex"] = to_hex(bytes);
  }
}

void Output::note(std::string_view text) const {
  if (!quiet) {
    warn(text);
  }
}

void Output::warn(std::string_view text) const {
  std::string message = "nxlock: ";
  message.append(text);
  message.push_back('\n');
  write_all(stderr, message);
}

void Output::error(int status, std::string_view what, std::string_view why) {
  std::string message = "nxlock: ";
  message.append(what);
  message.append(": ");
  message.append(why);
  if (json) {
    m_object["error"] = {{"subject", std::string(what)}, {"message", std::string(why)}};
    m_object["exit_status"] = status;
  }
  message.push_back('\n');
  write_all(stderr, message);
}

void Output::flush(int status) {
  if (json) {
    m_object["exit_status"] = status;
    const std::string text =
        m_object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (json_fd >= 0) {
      write_all(json_fd, text);
    } else {
      write_all(stdout, text);
    }
  } else {
    write_all(stdout, m_text);
  }
  std::fflush(stdout);
}

}  // namespace nxlock::cli
