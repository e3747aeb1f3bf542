// SystemLog: RFC 3164 datagrams to /dev/log, sent with MSG_DONTWAIT.
#include "util/system_log.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nxlock::util {

std::string syslog_datagram(LogLevel level, std::string_view ident, long pid, std::time_t when,
                            std::string_view message) {
  constexpr int k_facility_user = 1 << 3;  // LOG_USER, syslog(3)'s default
  // Not strftime's %b: the month's name must not follow a locale.
  constexpr const char* k_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm local{};
  ::localtime_r(&when, &local);
  char head[64];
  // "%h %e %T", as glibc writes it: the day padded with a space.
  std::snprintf(head, sizeof head, "<%d>%s %2d %02d:%02d:%02d ",
                k_facility_user + static_cast<int>(level), k_months[local.tm_mon % 12],
                local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec);
  std::string datagram = head;
  datagram.append(ident);
  datagram += "[" + std::to_string(pid) + "]: ";
  datagram.append(message);
  return datagram;
}

bool SystemLog::connect() {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (m_path.size() >= sizeof address.sun_path) {
    return false;
  }
  std::memcpy(address.sun_path, m_path.data(), m_path.size());
  // Non-blocking and close-on-exec: the job inherits nothing of it. A stream
  // socket at /dev/log (which glibc falls back to) is refused by connect():
  // a part-written line there would garble the next, so we keep to datagrams.
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd || ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address),
                       sizeof address) != 0) {
    return false;
  }
  m_fd = std::move(fd);
  return true;
}

bool SystemLog::send(LogLevel level, std::string_view message) {
  const std::string datagram =
      syslog_datagram(level, m_ident, static_cast<long>(::getpid()), std::time(nullptr), message);
  // A second try on a fresh connection: the log's reader may have restarted
  // since our last line (its old socket then refuses).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!m_fd && !connect()) {
      return false;
    }
    ssize_t sent = 0;
    do {
      sent = ::send(m_fd.get(), datagram.data(), datagram.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent >= 0) {
      return true;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
      return false;  // full: the line goes, the lock's release does not wait on it
    }
    m_fd.reset();
  }
  return false;
}

}  // namespace nxlock::util
