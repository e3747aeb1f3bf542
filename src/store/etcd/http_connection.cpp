// HttpConnection: requests written whole, responses read by HttpReader, each by a deadline.
#include "store/etcd/http_connection.hpp"

#include <poll.h>

#include "store/protocol_probe.hpp"
#include "util/error.hpp"
#include "util/escape.hpp"
#include "util/poll.hpp"
#include "util/trace.hpp"

namespace nxlock::store::etcd {

namespace {

using net::IoResult;
using net::IoStatus;
using util::Error;
using util::ErrorKind;

std::string host_text(const HostPort& member) {
  const bool ipv6 = member.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + member.host + "]" : member.host) + ":" + std::to_string(member.port);
}

}  // namespace

std::string format_post(const HostPort& host, std::string_view path, std::string_view body,
                        std::string_view headers) {
  std::string request;
  request.reserve(160 + path.size() + headers.size() + body.size());
  request += "POST ";
  request += path;
  request += " HTTP/1.1\r\nHost: ";
  request += host_text(host);
  request += "\r\nContent-Type: application/json\r\nContent-Length: ";
  request += std::to_string(body.size());
  request += "\r\n";
  request += headers;
  request += "\r\n";
  request += body;
  return request;
}

std::string member_address(const HostPort& member) {
  return host_text(member);
}

std::string what_answered(const HttpResponse& response) {
  std::string text = "`" + util::escape(response.status_line, 60) + "`";
  if (!response.server.empty()) {
    text += " from `" + util::escape(response.server, 60) + "`";
  }
  return text;
}

HttpConnection::HttpConnection(const net::Endpoint& endpoint, HostPort member)
    : m_endpoint(endpoint), m_member(std::move(member)) {}

std::string HttpConnection::describe() const {
  return m_endpoint.name + " (member " + host_text(m_member) + ")";
}

int HttpConnection::fd() const {
  return m_socket.fd.get();
}

void HttpConnection::close() {
  m_socket.transport.reset();  // a TLS session goes before its socket
  m_socket.fd.reset();
  m_reader = net::HttpReader();
  m_rest.clear();
  m_unread = 0;
  m_received = 0;
}

void HttpConnection::fail(std::string why) {
  close();
  throw Error(ErrorKind::unavailable, describe(), why);
}

void HttpConnection::fail_unanswered(std::string why, const net::Deadline& deadline) {
  if (m_received == 0) {
    close();
    if (auto redis = redis_instead_of_http(m_endpoint, m_member.host, m_member.port, deadline)) {
      why = std::move(*redis);
    }
  }
  fail(std::move(why));
}

void HttpConnection::ensure_connected(const net::Deadline& deadline) {
  if (m_socket.fd && m_unread == 0 && m_rest.empty()) {
    // An idle connection the server closed (or sent something on) is of no
    // more use: a request on it could be lost without an answer.
    pollfd entry{m_socket.fd.get(), POLLIN, 0};
    if (util::poll_until(&entry, 1, util::Micros(0)) != 0 &&
        ((entry.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0 || !m_socket.transport->idle_alive())) {
      util::trace("etcd: " + describe() + " closed the idle connection; reconnecting");
      close();
    }
  }
  if (!m_socket.fd) {
    close();
    m_socket = net::open_socket(m_endpoint, m_member.host, m_member.port, deadline);
  }
}

void HttpConnection::send_all(const std::string& bytes, const net::Deadline& deadline) {
  const auto unsent = net::write_all(*m_socket.transport, m_socket.fd.get(), bytes, deadline.at);
  if (!unsent) {
    return;
  }
  if (unsent->status == IoStatus::want_read || unsent->status == IoStatus::want_write) {
    fail("request " + deadline.passed());
  }
  fail_unanswered(
      unsent->status == IoStatus::closed ? "the member closed the connection" : unsent->error,
      deadline);
}

bool HttpConnection::read_available() {
  if (!m_socket.fd) {
    return false;
  }
  char buffer[16384];
  for (;;) {
    const IoResult step = m_socket.transport->read(buffer, sizeof buffer);
    if (step.status == IoStatus::done) {
      m_received += step.bytes;
      m_reader.feed(std::string_view(buffer, step.bytes));
      if (m_reader.failed()) {
        return false;
      }
      continue;
    }
    if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
      return !m_reader.complete();
    }
    m_reader.end_of_stream();
    return false;
  }
}

HttpResponse HttpConnection::receive(const net::Deadline& deadline) {
  m_reader = net::HttpReader();
  if (!m_rest.empty()) {
    m_reader.feed(std::exchange(m_rest, std::string()));
  }
  char buffer[16384];
  while (!m_reader.complete()) {
    if (m_reader.failed()) {
      fail("not an etcd v3 gateway: " + m_reader.error());
    }
    const IoResult step = m_socket.transport->read(buffer, sizeof buffer);
    if (step.status == IoStatus::done) {
      m_received += step.bytes;
      m_reader.feed(std::string_view(buffer, step.bytes));
      continue;
    }
    if (step.status == IoStatus::want_read || step.status == IoStatus::want_write) {
      if (!net::wait_ready(m_socket.fd.get(), step.status, deadline.at)) {
        fail("no answer: " + deadline.passed());
      }
      continue;
    }
    if (step.status == IoStatus::closed) {
      m_reader.end_of_stream();
      if (m_reader.complete()) {
        break;
      }
      fail_unanswered(m_reader.error(), deadline);
    }
    fail_unanswered(m_socket.transport->explain(step).error, deadline);
  }
  HttpResponse response{m_reader.status(), m_reader.take_body(), m_reader.status_line(),
                        m_reader.server()};
  m_rest = m_reader.take_rest();
  if (m_reader.closes()) {
    close();
  }
  return response;
}

void HttpConnection::send_only(const std::string& request, const net::Deadline& deadline) {
  ensure_connected(deadline);
  send_all(request, deadline);
  ++m_unread;
}

HttpResponse HttpConnection::exchange(const std::string& request, const net::Deadline& deadline) {
  while (m_unread > 0 && m_socket.fd) {
    --m_unread;
    (void)receive(deadline);  // a send_only()'s answer: nobody waits for it
  }
  m_unread = 0;
  ensure_connected(deadline);
  send_all(request, deadline);
  return receive(deadline);
}

std::vector<HttpResponse> HttpConnection::exchange_many(const std::string& requests,
                                                        std::size_t count,
                                                        const net::Deadline& deadline) {
  drain(deadline);
  ensure_connected(deadline);
  send_all(requests, deadline);
  std::vector<HttpResponse> responses;
  responses.reserve(count);
  while (responses.size() < count) {
    if (!m_socket.fd) {
      fail("the member closed the connection mid-pipeline");
    }
    responses.push_back(receive(deadline));
  }
  return responses;
}

void HttpConnection::drain(const net::Deadline& deadline) {
  try {
    while (m_unread > 0 && m_socket.fd) {
      --m_unread;
      (void)receive(deadline);
    }
  } catch (const Error& e) {
    util::trace(std::string("etcd: ") + e.what());
  }
  m_unread = 0;
}

void HttpConnection::open_stream(const std::string& request, const net::Deadline& deadline) {
  close();
  ensure_connected(deadline);
  send_all(request, deadline);
  m_reader = net::HttpReader();
}

}  // namespace nxlock::store::etcd
