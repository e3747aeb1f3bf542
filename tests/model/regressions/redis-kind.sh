#!/usr/bin/env bash
# nxlock model checker: backend redis, seed 33
# run: NXLOCK_BIN=build/dev/nxlock bash THIS-FILE
T=${T:-$(mktemp -d)}; export T
if [[ -z ${URLS:-} ]]; then  # else: the servers URLS (and P0..P2) name
  PORT=$(shuf -i 20000-40000 -n 1)
  redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes --pidfile "$T/redis.pid" --dir "$T" >/dev/null
  trap 'kill "$(cat "$T/redis.pid")"' EXIT
  until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.05; done
  URLS="-u redis://127.0.0.1:$PORT"
fi
NX=${NXLOCK_BIN:-nxlock}
fails=0
nx() { "$NX" $URLS "$@"; }
# check "STATUSES" [JSON-TEST] -- CMD...: runs CMD into $out; a status outside STATUSES,
# or --json output for which the Python expression JSON-TEST (on j) is false, is a mismatch.
check() {
  local allowed=$1 test=$2; shift 3
  out=$("$@" 2>"$T/err"); local st=$?
  if [[ " $allowed " != *" $st "* ]]; then
    echo "MISMATCH: $* -> exit $st, model: $allowed ($(head -c 300 "$T/err"))"; fails=$((fails + 1))
  elif [[ -n $test ]] && ! python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if ('"$test"') else 1)' "$out"; then
    echo "MISMATCH: $* -> $out, model: $test"; fails=$((fails + 1))
  fi
}
# --slots: k1 1, k2 1
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 2 k1
v1=$out
check 0 'j.get("kind") == "exclusive"' -- nx --json status k1
# ^ the model checker's complaint: status k1: kind None, the model: exclusive held by [Hold(exclusive 1795851344 short)]
echo "$fails mismatches"
exit $((fails > 0))
