#!/usr/bin/env bash
# nxlock model checker: backend etcd, seed 33
# run: NXLOCK_BIN=build/dev/nxlock bash THIS-FILE
# found: unlock KEY VALUE revoked a lease whose key under KEY was gone (after unlock --force), exit 0
T=${T:-$(mktemp -d)}; export T
if [[ -z ${URLS:-} ]]; then  # else: the servers URLS (and P0..P2) name
  PORT=$(shuf -i 20000-40000 -n 1); PEER=$((PORT + 1))
  etcd --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$PORT" --advertise-client-urls "http://127.0.0.1:$PORT" --listen-peer-urls "http://127.0.0.1:$PEER" --initial-advertise-peer-urls "http://127.0.0.1:$PEER" --initial-cluster "default=http://127.0.0.1:$PEER" --log-level error >"$T/etcd.log" 2>&1 & EPID=$!
  trap 'kill "$EPID"' EXIT
  until etcdctl --endpoints "127.0.0.1:$PORT" endpoint health >/dev/null 2>&1; do sleep 0.1; done
  URLS="-u etcd://127.0.0.1:$PORT"
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
# until_expired VALUE...: sleeps until the second after every VALUE's expiry (TS, TS:ID,
# I:TS or etcd's TS@LEASE) has begun: the servers then find them expired, as the run did after its wait.
until_expired() {
  local v ts latest=0
  for v in "$@"; do
    ts=$v; [[ $ts == *:s* ]] && ts=${ts%%:*}; [[ $ts == *:* ]] && ts=${ts#*:}
    [[ $ts == *@* ]] && ts=${ts%%@*}
    ((ts > latest)) && latest=$ts
  done
  while (($(date +%s) <= latest)); do sleep 0.1; done
}
# job_exit N SECONDS "STATUSES" [stops]: job N's exit status, once it exits (within
# SECONDS; "stops": by itself, else its end file is made and it gets 10 s more).
job_exit() {
  local n=$1 seconds=$2 allowed=$3 j="j$1" i
  for ((i = 0; i < seconds * 10; i++)); do kill -0 "${!j}" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "${!j}" 2>/dev/null; then
    [[ ${4:-} == stops ]] && { echo "MISMATCH: job $n still runs after $seconds s"; fails=$((fails + 1)); }
    touch "$T/end$n"
  fi
  wait "${!j}"; local st=$?
  if [[ " $allowed " != *" $st "* ]]; then
    echo "MISMATCH: job $n exited $st, model: $allowed ($(head -c 300 "$T/job$n.err"))"; fails=$((fails + 1))
  fi
}
# --slots: k1 1, k2 3
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx unlock k2 garbage
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx unlock k2 0x10
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 k1
v1=$out
check 0 'j.get("kind") == "exclusive"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx unlock --force k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx lock -n -t 1 --slots 1 k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k1 "$v1"
# ^ the model checker's complaint: nxlock unlock k1 1795865238@77b8a221b1c77c0f: exit 0, the model says [1] (stdout '', stderr '')
echo "$fails mismatches"
exit $((fails > 0))
