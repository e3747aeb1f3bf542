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
# --slots: k1 3, k2 2
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json unlock --force k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 --slots 2 k2
v1=$out
check 0 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx --json unlock k2 "$v1"
# ^ the model checker's complaint: nxlock --json unlock k2 1:1795855333: exit 64, the model says [0] (stdout '{"error":{"message":"\'1:1795855333\' is not a lock value (the number `lock` printed)","subject":"lock \'k2\'"},"exit_status":64,"key":"k2"}', stderr "nxlock: lock 'k2': '1:1795855333' is not a lock value (the number `lock` printed)")
echo "$fails mismatches"
exit $((fails > 0))
