/* The least a guard on etcd must do, for the benchmark's floor beside `etcdctl lock`.
 *
 * usage: etcd_floor PORT KEY COMMAND [ARGS...]
 *
 * Three requests to a member on 127.0.0.1:PORT over etcd's JSON gateway, on one
 * keep-alive connection: grant a lease; in one txn, put KEY/<lease id in hex> if
 * absent and read the lowest create revision under KEY/ (etcd's Mutex recipe;
 * another owner: revoke and exit 75, as run-locked -n); then run COMMAND in a
 * process group of its own with a watchdog that kills that group if this wrapper
 * dies (as bench/guard_floor.c); then revoke the lease and pass the status on.
 * What it leaves out, and run-locked does not: keepalives, watches, deadlines,
 * holder details, tokens in the environment, parsing beyond what this needs, messages.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int conn = -1;
static char reply[65536];

/* One POST and its whole reply (Content-Length bodies: the gateway's unary answers). */
static const char* post(const char* path, const char* body) {
  char request[4096];
  int n = snprintf(request, sizeof request,
                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   path, strlen(body), body);
  if (send(conn, request, (size_t)n, MSG_NOSIGNAL) != n) exit(69);
  size_t got = 0;
  for (;;) {
    ssize_t r = recv(conn, reply + got, sizeof reply - 1 - got, 0);
    if (r <= 0) exit(69);
    got += (size_t)r;
    reply[got] = '\0';
    char* end = strstr(reply, "\r\n\r\n");
    char* length = strcasestr(reply, "Content-Length:");
    if (end && length && got >= (size_t)(end + 4 - reply) + strtoul(length + 15, NULL, 10)) {
      return end + 4;
    }
  }
}

/* The digits of the first "NAME":"digits" after `from`. */
static long long number(const char* from, const char* name) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\":\"", name);
  const char* at = strstr(from, quoted);
  if (!at) exit(69);
  return strtoll(at + strlen(quoted), NULL, 10);
}

static void base64(const char* in, char* out) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(in), i = 0;
  for (; i + 2 < n; i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    *out++ = digits[v >> 18], *out++ = digits[v >> 12 & 63], *out++ = digits[v >> 6 & 63],
    *out++ = digits[v & 63];
  }
  if (n - i == 1) {
    unsigned v = (unsigned char)in[i] << 16;
    *out++ = digits[v >> 18], *out++ = digits[v >> 12 & 63], *out++ = '=', *out++ = '=';
  } else if (n - i == 2) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    *out++ = digits[v >> 18], *out++ = digits[v >> 12 & 63], *out++ = digits[v >> 6 & 63],
    *out++ = '=';
  }
  *out = '\0';
}

static void revoke_lease(long long lease) {
  char body[64];
  snprintf(body, sizeof body, "{\"ID\":\"%lld\"}", lease);
  post("/v3/lease/revoke", body);
}

int main(int argc, char** argv) {
  if (argc < 4 || strlen(argv[2]) > 200) {
    fprintf(stderr, "usage: etcd_floor PORT KEY COMMAND [ARGS...] (KEY at most 200 bytes)\n");
    return 64;
  }
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  conn = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(conn, (struct sockaddr*)&address, sizeof address) != 0) return 69;

  long long lease = number(post("/v3/lease/grant", "{\"TTL\":\"60\"}"), "ID");
  char prefix[512], key[600], prefix64[800], key64[900], end64[800], txn[8192];
  snprintf(prefix, sizeof prefix, "%s/", argv[2]);
  snprintf(key, sizeof key, "%s%llx", prefix, lease);
  base64(prefix, prefix64);
  base64(key, key64);
  prefix[strlen(prefix) - 1]++; /* the range's end: the prefix with its last byte raised */
  base64(prefix, end64);
  snprintf(txn, sizeof txn,
           "{\"compare\":[{\"key\":\"%s\",\"target\":\"CREATE\",\"create_revision\":\"0\"}],"
           "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"\",\"lease\":\"%lld\"}},"
           "{\"request_range\":{\"key\":\"%s\",\"range_end\":\"%s\",\"limit\":\"1\","
           "\"sort_order\":\"ASCEND\",\"sort_target\":\"CREATE\"}}],"
           "\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
           key64, key64, lease, prefix64, end64, key64);
  const char* taken = post("/v3/kv/txn", txn);
  /* Ours if the lowest create revision under the prefix is our put's revision. */
  long long ours = number(taken, "revision");
  const char* owner = strstr(taken, "\"kvs\"");
  if (!owner || number(owner, "create_revision") != ours) {
    revoke_lease(lease);
    return 75;
  }

  pid_t job = fork();
  if (job < 0) return 71;
  if (job == 0) {
    setpgid(0, 0);
    execvp(argv[3], argv + 3);
    _exit(127);
  }
  setpgid(job, job);
  pid_t wrapper = getpid();
  pid_t watchdog = fork();
  if (watchdog == 0) {
    int wrapper_fd = (int)syscall(SYS_pidfd_open, wrapper, 0);
    if (wrapper_fd < 0) _exit(70);
    struct pollfd p = {.fd = wrapper_fd, .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    kill(-job, SIGKILL);
    _exit(0);
  }
  int status = 0;
  while (waitpid(job, &status, 0) < 0 && errno == EINTR) {
  }
  revoke_lease(lease);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
