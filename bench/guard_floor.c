/* The least a guard with nxlock's promises must do on one host, for the benchmark's floor.
 *
 * usage: guard_floor LOCKFILE COMMAND [ARGS...]
 *
 * Takes a kernel lock on LOCKFILE (busy: exit 75, as run-locked -n), starts
 * COMMAND in a process group of its own, forks a watchdog that kills that
 * group if this wrapper dies (a pidfd and poll: no polling loop), waits for
 * COMMAND and passes its status through (128+N for a signal). What it leaves
 * out, and run-locked does not: a store with tokens and holder records, a lock
 * that outlives a crash as a timestamp, renewal, signal forwarding, messages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int pidfd_of(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: guard_floor LOCKFILE COMMAND [ARGS...]\n");
    return 64;
  }
  int lock_fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    perror(argv[1]);
    return 73;
  }
  /* A POSIX record lock, not flock(2): it is not inherited by fork, so the
   * watchdog, which may run long after this wrapper's exit on a loaded host,
   * does not keep it taken; a flock would make the next run find it busy (exit
   * 75) without doing a guard's work. */
  struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fcntl(lock_fd, F_SETLK, &whole) != 0) {
    return errno == EACCES || errno == EAGAIN ? 75 : 71;
  }

  pid_t job = fork();
  if (job < 0) return 71;
  if (job == 0) {
    setpgid(0, 0);
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  setpgid(job, job); /* both sides, so the group exists before the watchdog may use it */

  pid_t wrapper = getpid();
  pid_t watchdog = fork();
  if (watchdog == 0) {
    /* The wrapper's pidfd becomes readable when it exits, however it dies. */
    int wrapper_fd = pidfd_of(wrapper);
    if (wrapper_fd < 0) _exit(70);
    struct pollfd p = {.fd = wrapper_fd, .events = POLLIN};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    kill(-job, SIGKILL); /* ESRCH once the job ended: nothing is left to stop */
    _exit(0);
  }

  int status = 0;
  while (waitpid(job, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
