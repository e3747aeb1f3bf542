// The watchdog's two pipes: environment settings encoded, reads and writes whole.
#include "run/watchdog_wire.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace nxlock::run {

std::string encode_environment(const std::vector<EnvSetting>& settings) {
  std::string bytes;
  for (const auto& setting : settings) {
    bytes.append(setting.name).push_back('\0');
    if (setting.value) {
      bytes.append("=").append(*setting.value).push_back('\0');
    } else {
      bytes.push_back('-');
    }
  }
  return bytes;
}

void apply_environment(const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::string name = bytes.c_str() + at;
    at += name.size() + 1;
    if (at < bytes.size() && bytes[at] == '=') {
      const std::string value = bytes.c_str() + at + 1;
      at += value.size() + 2;
      setenv(name.c_str(), value.c_str(), 1);
    } else {
      ++at;
      unsetenv(name.c_str());
    }
  }
}

std::string encode_values(const std::vector<std::string>& values) {
  std::string bytes;
  for (const auto& value : values) {
    const auto size = static_cast<std::uint32_t>(value.size());
    bytes.append(reinterpret_cast<const char*>(&size), sizeof size).append(value);
  }
  return bytes;
}

std::vector<std::string> decode_values(const std::string& bytes) {
  std::vector<std::string> values;
  std::size_t at = 0;
  std::uint32_t size = 0;
  while (at + sizeof size <= bytes.size()) {
    std::memcpy(&size, bytes.data() + at, sizeof size);
    at += sizeof size;
    if (size > bytes.size() - at) {
      break;  // never from nxlock, which wrote it whole
    }
    values.emplace_back(bytes, at, size);
    at += size;
  }
  return values;
}

bool read_exactly(int fd, void* data, std::size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = read(fd, at, size);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    at += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_exactly(int fd, const std::string& bytes) {
  const char* at = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t put = write(fd, at, left);
    if (put < 0 && errno == EINTR) {
      continue;
    }
    if (put <= 0) {
      return false;
    }
    at += put;
    left -= static_cast<std::size_t>(put);
  }
  return true;
}

bool send_report(int fd, Report::Kind kind, int value) {
  const Report report{kind, value};
  return write(fd, &report, sizeof report) == static_cast<ssize_t>(sizeof report);
}

bool receive_report(int fd, Report& report) {
  return read_exactly(fd, &report, sizeof report);
}

}  // namespace nxlock::run
