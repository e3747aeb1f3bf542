// HttpReader: status line, headers, and a body by Content-Length, chunks, or the connection's end.
#include "store/net/http_reader.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

#include "util/escape.hpp"

namespace nxlock::store::net {

namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool same_word(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

// Whether the comma-separated header value lists `token` (Connection: close, Transfer-Encoding).
bool lists(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    if (same_word(trim(value.substr(0, comma)), token)) {
      return true;
    }
    if (comma == std::string_view::npos) {
      break;
    }
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

void HttpReader::fail(std::string why) {
  m_state = State::failed;
  m_error = std::move(why);
  m_buffer.clear();
}

void HttpReader::parse_head(std::string_view head) {
  // HTTP/1.1 200 OK
  const auto line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    return fail("not an HTTP/1.x response");
  }
  const auto code = status_line.substr(9, 3);
  const auto [end, ec] = std::from_chars(code.data(), code.data() + code.size(), m_status);
  if (ec != std::errc() || end != code.data() + code.size() || m_status < 100 || m_status > 599) {
    return fail("malformed HTTP status line");
  }
  m_status_line = status_line.substr(0, k_quoted);
  m_closes = status_line[7] == '0';  // HTTP/1.0 closes unless told otherwise
  std::optional<std::uint64_t> length;
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    const auto eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return fail("malformed HTTP header line");
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (same_word(name, "content-length")) {
      std::uint64_t n = 0;
      const auto [last, error] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (error != std::errc() || last != value.data() + value.size() || value.empty() ||
          (length && *length != n)) {
        return fail("malformed Content-Length");
      }
      length = n;
    } else if (same_word(name, "transfer-encoding")) {
      if (!same_word(value, "chunked")) {
        return fail("unsupported Transfer-Encoding '" + util::escape(value.substr(0, 40)) + "'");
      }
      m_chunked = true;
    } else if (same_word(name, "server")) {
      m_server = value.substr(0, k_quoted);
    } else if (same_word(name, "connection")) {
      m_closes = lists(value, "close") || (m_closes && !lists(value, "keep-alive"));
    }
  }
  if (m_status < 200 || m_status == 204 || m_status == 304) {
    // No body (1xx is not something etcd sends us: it ends here, and fails later if anything follows).
    m_state = State::done;
  } else if (m_chunked) {
    m_state = State::chunk_size;
  } else if (length) {
    if (*length > k_max_body) {
      return fail("response body too large");
    }
    m_left = *length;
    m_state = m_left == 0 ? State::done : State::length_body;
  } else {
    m_closes = true;
    m_state = State::until_close;
  }
}

bool HttpReader::step() {
  switch (m_state) {
    case State::head: {
      // Not HTTP at all (a Redis server's -ERR lines): said at once, not at the deadline.
      constexpr std::string_view k_version = "HTTP/1.";
      const std::size_t known = std::min(m_buffer.size(), k_version.size());
      if (m_buffer.compare(0, known, k_version.substr(0, known)) != 0) {
        fail("not an HTTP/1.x response");
        return false;
      }
      const auto end = m_buffer.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (m_buffer.size() > k_max_head) {
          fail("HTTP header too long");
        }
        return false;
      }
      const std::string head = m_buffer.substr(0, end);
      m_buffer.erase(0, end + 4);
      parse_head(head);
      return m_state != State::failed;
    }
    case State::length_body:
    case State::chunk_data: {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(m_left, m_buffer.size()));
      if (n == 0) {
        return false;
      }
      if (m_body.size() + n > k_max_body) {
        fail("response body too large");
        return false;
      }
      m_body.append(m_buffer, 0, n);
      m_buffer.erase(0, n);
      m_left -= n;
      if (m_left == 0) {
        m_state = m_state == State::length_body ? State::done : State::chunk_data_end;
      }
      return true;
    }
    case State::until_close:
      if (m_buffer.empty()) {
        return false;
      }
      if (m_body.size() + m_buffer.size() > k_max_body) {
        fail("response body too large");
        return false;
      }
      m_body += m_buffer;
      m_buffer.clear();
      return false;
    case State::chunk_size: {
      const auto eol = m_buffer.find("\r\n");
      if (eol == std::string::npos) {
        if (m_buffer.size() > 1024) {
          fail("malformed chunk size");
        }
        return false;
      }
      // HEX[;extension]
      std::string_view line(m_buffer.data(), eol);
      line = trim(line.substr(0, line.find(';')));
      std::uint64_t size = 0;
      const auto [last, ec] = std::from_chars(line.data(), line.data() + line.size(), size, 16);
      if (ec != std::errc() || last != line.data() + line.size() || line.empty() ||
          size > k_max_body) {
        fail("malformed chunk size");
        return false;
      }
      m_buffer.erase(0, eol + 2);
      m_left = size;
      m_state = size == 0 ? State::trailer : State::chunk_data;
      return true;
    }
    case State::chunk_data_end:
      if (m_buffer.size() < 2) {
        return false;
      }
      if (m_buffer.compare(0, 2, "\r\n") != 0) {
        fail("malformed chunk end");
        return false;
      }
      m_buffer.erase(0, 2);
      m_state = State::chunk_size;
      return true;
    case State::trailer: {
      // Trailer lines (none from etcd), then the empty line.
      const auto eol = m_buffer.find("\r\n");
      if (eol == std::string::npos) {
        if (m_buffer.size() > k_max_head) {
          fail("HTTP trailer too long");
        }
        return false;
      }
      m_buffer.erase(0, eol + 2);
      if (eol == 0) {
        m_state = State::done;
      }
      return true;
    }
    case State::done:
    case State::failed:
      return false;
  }
  return false;
}

void HttpReader::feed(std::string_view bytes) {
  if (m_state == State::failed) {
    return;
  }
  m_buffer.append(bytes);
  while (step()) {
  }
}

void HttpReader::end_of_stream() {
  if (m_state == State::until_close) {
    m_state = State::done;
  } else if (m_state != State::done && m_state != State::failed) {
    fail(m_state == State::head && m_buffer.empty() ? "the server closed the connection"
                                                    : "the server closed the connection mid-response");
  }
}

std::string HttpReader::take_body() {
  return std::exchange(m_body, std::string());
}

std::string HttpReader::take_rest() {
  return m_state == State::done ? std::exchange(m_buffer, std::string()) : std::string();
}

}  // namespace nxlock::store::net
