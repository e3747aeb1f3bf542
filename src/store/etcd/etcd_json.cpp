// etcd_json: base64 and int64-as-string, as the gateway's JSON carries them.
#include "store/etcd/etcd_json.hpp"

#include <charconv>

#include "util/error.hpp"

namespace nxlock::store::etcd {

namespace {

constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') {
    return c - 'A';
  }
  if (c >= 'a' && c <= 'z') {
    return c - 'a' + 26;
  }
  if (c >= '0' && c <= '9') {
    return c - '0' + 52;
  }
  if (c == '+' || c == '-') {
    return 62;
  }
  if (c == '/' || c == '_') {
    return 63;
  }
  return -1;
}

[[noreturn]] void unexpected(std::string_view what, std::string_view name) {
  throw util::Error(util::ErrorKind::internal, std::string(what),
                    "unexpected answer from etcd (field '" + std::string(name) + "')");
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += k_alphabet[n >> 18 & 63];
    out += k_alphabet[n >> 12 & 63];
    out += k_alphabet[n >> 6 & 63];
    out += k_alphabet[n & 63];
  }
  if (i + 1 == bytes.size()) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    out += k_alphabet[n >> 18 & 63];
    out += k_alphabet[n >> 12 & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const unsigned n = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += k_alphabet[n >> 18 & 63];
    out += k_alphabet[n >> 12 & 63];
    out += k_alphabet[n >> 6 & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') {
    text.remove_suffix(1);
  }
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() * 3 / 4);
  unsigned bits = 0;
  int count = 0;
  for (const char c : text) {
    const int value = sextet(c);
    if (value < 0) {
      return std::nullopt;
    }
    bits = bits << 6 | static_cast<unsigned>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>(bits >> count & 0xff);
    }
  }
  return out;
}

std::int64_t int_field(const nlohmann::json& object, std::string_view name, std::string_view what) {
  if (!object.is_object()) {
    unexpected(what, name);
  }
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    return 0;
  }
  if (it->is_number_integer()) {
    return it->get<std::int64_t>();
  }
  if (!it->is_string()) {
    unexpected(what, name);
  }
  const auto& text = it->get_ref<const std::string&>();
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && end == text.data() + text.size()) {
    return value;
  }
  // Member and cluster ids are uint64: kept as their bits (only compared).
  std::uint64_t id = 0;
  const auto [last, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || last != text.data() + text.size()) {
    unexpected(what, name);
  }
  return static_cast<std::int64_t>(id);
}

std::string bytes_field(const nlohmann::json& object, std::string_view name, std::string_view what) {
  if (!object.is_object()) {
    unexpected(what, name);
  }
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) {
    return {};
  }
  if (!it->is_string()) {
    unexpected(what, name);
  }
  auto bytes = base64_decode(it->get_ref<const std::string&>());
  if (!bytes) {
    unexpected(what, name);
  }
  return std::move(*bytes);
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key: etcd's "\0" range end
}

}  // namespace nxlock::store::etcd
