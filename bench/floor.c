// The floor of "a new process does one Redis command": hiredis connect, one SETNX, print the reply.
//
// usage: floor HOST PORT KEY VALUE
//
// What any client must do at least: exec, dynamic loading of libhiredis, one
// TCP connect, one round trip, one line of output. bench/run sets `nxlock setnx`
// beside it (BENCHMARKS.md, "Today's figures": nxlock / floor ≤ 1.15).
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: floor HOST PORT KEY VALUE\n");
    return 64;
  }
  redisContext* c = redisConnect(argv[1], atoi(argv[2]));
  if (c == NULL || c->err) {
    fprintf(stderr, "floor: %s\n", c ? c->errstr : "out of memory");
    return 69;
  }
  redisReply* reply = redisCommand(c, "SETNX %s %s", argv[3], argv[4]);
  if (reply == NULL || reply->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "floor: %s\n", reply ? "unexpected reply" : c->errstr);
    return 69;
  }
  printf("%lld\n", reply->integer);
  // Like nxlock setnx: 0 when the key existed (exit 1), 1 when it was set.
  const int status = reply->integer == 1 ? 0 : 1;
  freeReplyObject(reply);
  redisFree(c);
  return status;
}
