#!/usr/bin/env bash
# nxlock model checker: backend embedded, seed 1
# run: NXLOCK_BIN=build/dev/nxlock bash THIS-FILE
T=${T:-$(mktemp -d)}; export T
if [[ -z ${URLS:-} ]]; then  # else: the servers URLS (and P0..P2) name
  URLS="-u file://$T/store"
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
# until_expired VALUE...: sleeps until the second after every VALUE's expiry (TS, TS:ID or
# I:TS) has begun: the servers then find them expired, as the run did after its wait.
until_expired() {
  local v ts latest=0
  for v in "$@"; do
    ts=$v; [[ $ts == *:s* ]] && ts=${ts%%:*}; [[ $ts == *:* ]] && ts=${ts#*:}
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
# --slots: k1 2, k2 2
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json unlock --force k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx unlock k1 0x10
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx --json unlock k1 garbage
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 1 --slots 2 k2
v1=$out
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx get k1 
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 75 '' -- nx lock -n -t 3600 k2
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
until_expired "$v1"  # every short hold (2.2 s in the run)
check 64 '' -- nx --json unlock k1 garbage
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 --slots 2 k1 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info1.tmp && mv $T/info1.tmp $T/info1; while [ ! -e $T/end1 ]; do sleep 0.1; done' >/dev/null 2>$T/job1.err & j1=$!
until [ -e $T/info1 ]; do sleep 0.05; done
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx unlock k2 12abc
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
touch $T/end1; job_exit 1 10 0
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx del k1 
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 --shared k2 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info2.tmp && mv $T/info2.tmp $T/info2; while [ ! -e $T/end2 ]; do sleep 0.1; done' >/dev/null 2>$T/job2.err & j2=$!
until [ -e $T/info2 ]; do sleep 0.05; done
check 0 'j.get("kind") == "shared" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx renew -t 3600 k2 "${v1#*:}"
check 0 'j.get("kind") == "shared" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k2 "$v1"
check 0 'j.get("kind") == "shared" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k1 "$v1"
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k1 "$v1"
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 --shared k2
v2=$out
check 0 'j.get("kind") == "shared" and j.get("shared_holders") == 2' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx getset k2 junk-value
check 65 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
job_exit 2 3 79 stops  # at its next renewal, by itself
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx renew -t 3600 k2 "${v2%%:*}"
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k2 "$v1"
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 --slots 2 k2 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info3.tmp && mv $T/info3.tmp $T/info3; while [ ! -e $T/end3 ]; do sleep 0.1; done' >/dev/null 2>$T/job3.err & j3=$!
until [ -e $T/info3 ]; do sleep 0.05; done
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx del k2 
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k2 "$v1"
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
job_exit 3 3 79 stops  # at its next renewal, by itself
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx renew -t 3600 k2 "$v1"
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 'j.get("reason") in ("expired", "absent")' -- nx --json renew -t 3600 k1 "$v1"
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx --json unlock k1 12abc
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 k1 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info4.tmp && mv $T/info4.tmp $T/info4; while [ ! -e $T/end4 ]; do sleep 0.1; done' >/dev/null 2>$T/job4.err & j4=$!
until [ -e $T/info4 ]; do sleep 0.05; done
check 0 'j.get("kind") == "exclusive"' -- nx --json status k1
check '0 1' '' -- nx --json list
touch $T/end4; job_exit 4 10 0
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx setnx k1 junk-value
check 65 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx renew -t 3600 k1 0x10
check 65 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 --slots 2 k2
v3=$out
check 0 'j.get("kind") == "slots" and j.get("shared_holders") == 1' -- nx --json status k2
check '0 1' '' -- nx --json list
check 65 '' -- nx lock -n -t 3600 k1
check 65 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx --json unlock --force k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx setnx k1 "$(( $(date +%s) + 600 ))"
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 k2
v4=$out
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795869377"' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx renew -t 3600 k2 "$v4"
v5=$out
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795869377"' -- nx --json status k2
check '0 1' '' -- nx --json list
check 75 '' -- nx lock -n -t 3600 k2
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795869377"' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795869377"' -- nx --json status k2
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795869377"' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 'j["reason"] == "held_by_other"' -- nx --json unlock k1 "$v3"
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k1 "$v3"
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 k1 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info5.tmp && mv $T/info5.tmp $T/info5; while [ ! -e $T/end5 ]; do sleep 0.1; done' >/dev/null 2>$T/job5.err & j5=$!
job_exit 5 5 75
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx setnx k1 "$(( $(date +%s) + 600 ))"
check 0 'j.get("kind") == "exclusive" and j.get("value") == "1795866375"' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock k1 "$v5"
# ^ the model checker's complaint: nxlock unlock k1 1795869377: exit 0, the model says [1] (stdout '', stderr '')
touch $T/end1 $T/end2 $T/end3 $T/end4 $T/end5; wait
echo "$fails mismatches"
exit $((fails > 0))

