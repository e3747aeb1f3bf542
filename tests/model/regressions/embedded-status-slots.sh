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
# --slots: k1 2, k2 1
check 1 '' -- nx --json status k1
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
check 1 '' -- nx unlock --force k2
check 1 '' -- nx --json status k2
check '0 1' '' -- nx --json list
nx run-locked -n -t 2 --slots 1 k2 sh -c 'echo "$NXLOCK_FENCE ${NXLOCK_SLOT:-0}" > $T/info1.tmp && mv $T/info1.tmp $T/info1; while [ ! -e $T/end1 ]; do sleep 0.1; done' >/dev/null 2>$T/job1.err & j1=$!
until [ -e $T/info1 ]; do sleep 0.05; done
check 0 '' -- nx --json status k2
# ^ the model checker's complaint: nxlock --json status k2: exit 1, the model says [0] (stdout '{"exit_status":1,"fence":null,"held":false,"key":"k2","now":1795851272,"state":"free"}', stderr '')
touch $T/end1 ; wait
echo "$fails mismatches"
exit $((fails > 0))
