/* Several commands timed run by run, interleaved: for a host whose load moves faster than a
 * hyperfine pass (BENCHMARKS.md, "The guard against its floor").
 *
 * usage: interleave ROUNDS COMMAND [ARGS...] [-- COMMAND [ARGS...]]...
 *
 * Each round starts every command once (posix_spawn, standard output to
 * /dev/null), the order rotated every round, and times it to its reaping.
 * Prints each command's median wall time (and quartiles) and the median over
 * the rounds of its time divided by the last command's in the same round: a
 * load that moves between rounds falls on both sides of each ratio alike.
 * Counts the runs that did not exit 0.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char** environ;

enum { k_max_commands = 16 };

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile of n values, sorted in place. */
static double quantile(double* values, int n, double q) {
  qsort(values, (size_t)n, sizeof *values, compare_doubles);
  return values[(int)(q * (n - 1))];
}

int main(int argc, char** argv) {
  if (argc < 3 || atoi(argv[1]) < 1) {
    fprintf(stderr, "usage: interleave ROUNDS COMMAND [ARGS...] [-- COMMAND [ARGS...]]...\n");
    return 64;
  }
  const int rounds = atoi(argv[1]);
  char** commands[k_max_commands];
  int count = 0;
  commands[count++] = &argv[2];
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0 && i + 1 < argc && count < k_max_commands) {
      argv[i] = NULL;
      commands[count++] = &argv[i + 1];
    }
  }
  double* times[k_max_commands];
  for (int c = 0; c < count; c++) {
    times[c] = malloc(sizeof(double) * (size_t)rounds);
  }
  double* scratch = malloc(sizeof(double) * (size_t)rounds);
  if (scratch == NULL) {
    return 71;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  int failed = 0;
  for (int r = 0; r < rounds; r++) {
    for (int j = 0; j < count; j++) {
      const int c = (j + r) % count;
      struct timespec start, end;
      pid_t pid;
      int status = 0;
      clock_gettime(CLOCK_MONOTONIC, &start);
      if (posix_spawnp(&pid, commands[c][0], &actions, NULL, commands[c], environ) != 0) {
        perror(commands[c][0]);
        return 71;
      }
      waitpid(pid, &status, 0);
      clock_gettime(CLOCK_MONOTONIC, &end);
      failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      times[c][r] = (double)(end.tv_sec - start.tv_sec) * 1e3 + (double)(end.tv_nsec - start.tv_nsec) / 1e6;
    }
  }
  for (int c = 0; c < count; c++) {
    for (int r = 0; r < rounds; r++) {
      scratch[r] = times[c][r] / times[count - 1][r];
    }
    const double ratio = quantile(scratch, rounds, 0.5);
    memcpy(scratch, times[c], sizeof(double) * (size_t)rounds);
    printf("%s: median %.3f ms (quartiles %.3f, %.3f); per round, / the last: median %.3f\n",
           commands[c][0], quantile(scratch, rounds, 0.5), quantile(scratch, rounds, 0.25),
           quantile(scratch, rounds, 0.75), ratio);
  }
  printf("runs that did not exit 0: %d\n", failed);
  return 0;
}
