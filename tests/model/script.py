"""The reproducing script: the steps a run took, as a bash script of nxlock commands.

Each command runs through `check`, which compares its exit status with the statuses the
model allowed and, given a Python test of the --json output (`j`), that too; the script
exits with the number of mismatches, so a kept script is a regression test (run.py --replay).
"""
import shlex

PRELUDE = r'''NX=${NXLOCK_BIN:-nxlock}
fails=0
nx() { "$NX" $URLS "$@"; }
# check "STATUSES" [JSON-TEST] -- CMD...: runs CMD into $out; a status outside STATUSES,
# or --json output for which the Python expression JSON-TEST (on j) is false, is a mismatch.
check() {
  local allowed=$1 test=$2; shift 3
  out=$("$@" 2>"$T/err"); local st=$?
  if [[ " $allowed " != *" $st "* ]]; then
    echo "MISMATCH: $* -> exit $st, model: $allowed ($(head -c 300 "$T/err"))"; fails=$((fails + 1))
  elif [[ -n $test ]] && ! python3 -c 'import json,os,sys; j=json.loads(sys.argv[1]); sys.exit(0 if ('"$test"') else 1)' "$out"; then
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
'''


class Script:
    def __init__(self, backend, header):
        self.backend = backend
        self.header = header
        self.lines = []
        self.names = {}  # a value the run saw -> the shell variable holding it
        self.printed = {}  # and back: the variable -> the value (a check's os.environ)
        self.count = 0
        self.jobs = []   # the background jobs' numbers: ended (their end files) at the end

    def var(self, value, derived=None):
        """A shell expression for `value` (a variable if a command printed it)."""
        if value in self.names:
            return '"$%s"' % self.names[value]
        if derived is not None and derived[0] in self.names:
            base, how = derived
            return '"${%s%s}"' % (self.names[base], how)
        return shlex.quote(value)

    def name(self, value):
        """The next variable, set to the last command's output (a printed value)."""
        self.count += 1
        name = "v%d" % self.count
        self.names[value] = name
        self.printed[name] = value
        self.lines.append("export %s=$out" % name)
        return name

    def py_value(self, value):
        """A Python expression for `value` in a check's test: the printed value's
        variable where a command printed it, so that a replay compares its own."""
        if value in self.names:
            return 'os.environ["%s"]' % self.names[value]
        return repr(value)

    def check(self, statuses, command, test=""):
        self.lines.append("check %s %s -- %s" % (shlex.quote(" ".join(str(s) for s in sorted(statuses))),
                                                shlex.quote(test), command))

    def raw(self, line):
        self.lines.append(line)

    def text(self):
        setup = ["  " + line for line in self.backend.script_setup()]
        return "\n".join(["#!/usr/bin/env bash", *["# " + h for h in self.header],
                          'T=${T:-$(mktemp -d)}; export T',
                          'if [[ -z ${URLS:-} ]]; then  # else: the servers URLS (and P0..P2) name',
                          *setup, "fi", PRELUDE.rstrip("\n"), *self.lines,
                          *(['touch %s; wait' % " ".join("$T/end%d" % n for n in self.jobs)]
                            if self.jobs else []),
                          'echo "$fails mismatches"', "exit $((fails > 0))", ""])
