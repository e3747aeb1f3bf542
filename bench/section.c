// The benchmark's critical section: logs "enter <ns> <pid>", holds for a few ms, logs "exit <ns> <pid>".
//
// usage: section LOG [HOLD_MS]   (HOLD_MS defaults to 5)
//
// One small exec'd program, the same for every lock under test, so the handoff
// (next enter - previous exit) measures the lock and nothing else. Each line is
// one write(2) to an O_APPEND file, so concurrent writers never interleave.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void log_line(int fd, const char *what) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  char line[96];
  int n = snprintf(line, sizeof line, "%s %lld %ld\n", what,
                   (long long)now.tv_sec * 1000000000LL + now.tv_nsec, (long)getpid());
  if (write(fd, line, (size_t)n) != n) {
    perror("section: write");
    exit(2);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: section LOG [HOLD_MS]\n");
    return 2;
  }
  long hold_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
  int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    perror(argv[1]);
    return 2;
  }
  log_line(fd, "enter");
  struct timespec hold = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
  while (nanosleep(&hold, &hold) != 0 && errno == EINTR) {
  }
  log_line(fd, "exit");
  return 0;
}
