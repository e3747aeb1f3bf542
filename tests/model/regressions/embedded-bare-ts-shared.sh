#!/usr/bin/env bash
# nxlock model checker: backend embedded, seed 33
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
# --slots: k1 3, k2 3
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx renew -t 3600 k2 garbage
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx --json renew -t 3600 k1 12abc
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 64 '' -- nx renew -t 3600 k2 garbage
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 2 --shared k1
v1=$out
check 0 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 1 '' -- nx --json status k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx lock -n -t 3600 --shared k2
v2=$out
check 0 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx --json status k2
check 0 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 0 '' -- nx renew -t 3600 k1 "$v1"
v3=$out
check 0 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx --json status k1
check 0 '' -- nx --json status k1
check '0 1' '' -- nx --json list
check 0 '' -- nx --json status k2
check 0 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx renew -t 3600 k2 "$v1"
check 0 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 64 '' -- nx renew -t 3600 k1 "${v3%%:*}"
# ^ the model checker's complaint: nxlock renew -t 3600 k1 1795855409: exit 0, the model says [64] (stdout '1795855410', stderr '')
echo "$fails mismatches"
exit $((fails > 0))
