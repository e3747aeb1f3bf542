// A waiter's place in the waiters' queue.
#include "lock/queue_ticket.hpp"

#include <unistd.h>

#include <cstdio>

#include "util/error.hpp"
#include "util/random.hpp"
#include "util/time.hpp"
#include "util/trace.hpp"

namespace nxlock::lock {

namespace {

constexpr std::size_t k_ticket_max = 63;  // an older nxlock reads a queue line's words with %63s
constexpr std::string_view k_kind_letters = "xsn";  // WaiterKind's order

bool ticket_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
         c == '_' || c == '-';
}

// The number at `text`'s start, and what follows it; nullopt without digits.
std::optional<std::int64_t> leading_number(std::string_view& text) {
  std::int64_t value = 0;
  std::size_t digits = 0;
  while (digits < text.size() && digits < 18 && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + (text[digits] - '0');
    ++digits;
  }
  if (digits == 0) {
    return std::nullopt;
  }
  text.remove_prefix(digits);
  return value;
}

}  // namespace

const char* waiter_kind_name(WaiterKind kind) {
  switch (kind) {
    case WaiterKind::shared:
      return "shared";
    case WaiterKind::slots:
      return "slots";
    case WaiterKind::exclusive:
      break;
  }
  return "exclusive";
}

std::string make_ticket(WaiterKind kind) {
  char head[64];
  std::snprintf(head, sizeof head, "q%08llx-%c%lld-%lld-",
                static_cast<unsigned long long>(util::random_u64() & 0xFFFFFFFFULL),
                k_kind_letters[static_cast<std::size_t>(kind)], static_cast<long long>(::getpid()),
                static_cast<long long>(util::whole_seconds(util::wall_now())));
  std::string ticket = head;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (const char* c = host; *c != '\0' && ticket.size() < k_ticket_max; ++c) {
    ticket.push_back(ticket_char(*c) ? *c : '_');
  }
  return ticket;
}

std::optional<WaiterDetails> details_of_ticket(std::string_view ticket) {
  // "q" + 8 hex + "-": an older nxlock's tickets ("q" + 16 hex) stop here.
  if (ticket.size() < 11 || ticket[0] != 'q' || ticket[9] != '-') {
    return std::nullopt;
  }
  std::string_view rest = ticket.substr(10);
  const auto letter = k_kind_letters.find(rest.front());
  if (letter == std::string_view::npos) {
    return std::nullopt;
  }
  rest.remove_prefix(1);
  WaiterDetails details;
  details.kind = static_cast<WaiterKind>(letter);
  const auto pid = leading_number(rest);
  if (!pid || rest.empty() || rest.front() != '-') {
    return std::nullopt;
  }
  rest.remove_prefix(1);
  const auto since = leading_number(rest);
  if (!since || rest.empty() || rest.front() != '-') {
    return std::nullopt;
  }
  rest.remove_prefix(1);
  details.pid = *pid;
  details.since = *since;
  details.host = std::string(rest);
  return details;
}

QueueTicket::~QueueTicket() {
  if (!m_joined) {
    return;
  }
  try {
    m_waiters.leave(m_key, m_queue, m_ticket);
  } catch (const util::Error& e) {
    util::trace(std::string("queue not left (the lease lapses): ") + e.what());
  }
}

}  // namespace nxlock::lock
