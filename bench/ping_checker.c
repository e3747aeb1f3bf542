/* A minimal healthchecks-like checker for bench/ping: on 127.0.0.1:PORT, answers
 * every request "200 OK" and closes, one connection at a time. The floor of a
 * checker: what is measured beside it is nxlock's own cost of a ping. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ping_checker PORT\n");
    return 64;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {0};
  address.sin_family = AF_INET;
  address.sin_port = htons((unsigned short)atoi(argv[1]));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0 || listen(listener, 128) != 0) {
    perror("ping_checker");
    return 1;
  }
  static const char answer[] =
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK";
  char buffer[8192];
  for (;;) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) {
      continue;
    }
    size_t got = 0;
    for (;;) { /* read until the end of the request's head */
      ssize_t n = read(fd, buffer + got, sizeof buffer - 1 - got);
      if (n <= 0) {
        break;
      }
      got += (size_t)n;
      buffer[got] = '\0';
      if (strstr(buffer, "\r\n\r\n") != NULL || got == sizeof buffer - 1) {
        (void)!write(fd, answer, sizeof answer - 1);
        break;
      }
    }
    close(fd);
  }
}
