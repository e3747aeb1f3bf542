# Drives an interactive zsh on a pseudo-terminal and asks it for completions.
#
# zsh completion functions only run inside a completion widget of a live line
# editor, so a zsh with a terminal is started, given the completion file on its
# fpath and `compinit`, and a widget bound to ^T that runs the normal completion
# (_main_complete) while a `compadd` wrapper records every match that would be
# offered (`compadd -O` computes the matches without adding them). The widget
# writes them to a numbered file; nothing is parsed off the screen.
import os
import pty
import select
import shutil
import signal
import tempfile
import threading
import time

_ZSHRC = r"""
bindkey -e
fpath=({completions} $fpath)
autoload -Uz compinit && compinit -u -D
typeset -gi _nxtest_n=0
_nxtest_capture() {{
  local -a _nxtest_matches
  compadd() {{
    local -a _nxtest_m
    builtin compadd -O _nxtest_m "$@" 2>/dev/null
    _nxtest_matches+=("${{_nxtest_m[@]}}")
    builtin compadd "$@"
  }}
  _main_complete
  unfunction compadd
  (( _nxtest_n++ ))
  print -rl -- "${{_nxtest_matches[@]}}" > {out}/$_nxtest_n.tmp
  mv {out}/$_nxtest_n.tmp {out}/$_nxtest_n.out
  compstate[insert]=''
  compstate[list]=''
}}
zle -C nxtest-complete complete-word _nxtest_capture
bindkey '^T' nxtest-complete
"""


class ZshCompleter:
    """Use as a context manager; complete(line) returns the matches for the line's last word."""

    def __init__(self, completions_dir, timeout=20):
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="nxlock-zsh-")
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)
        with open(os.path.join(self.dir, ".zshrc"), "w") as f:
            f.write(_ZSHRC.format(completions=completions_dir, out=self.out))
        self.count = 0
        self.screen = bytearray()

    def __enter__(self):
        env = dict(os.environ, ZDOTDIR=self.dir, TERM="dumb", HISTFILE="/dev/null")
        env.pop("VISUAL", None)
        env.pop("EDITOR", None)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            # -d: no global rc files (a distribution's compinit or key bindings).
            os.execvpe("zsh", ["zsh", "-d", "-i"], env)
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        return self

    def _drain(self):
        # The pty's buffer must keep moving or zsh blocks writing its prompt.
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.5)
                if ready:
                    data = os.read(self.fd, 4096)
                    if not data:
                        return
                    self.screen += data
            except OSError:
                return

    def complete(self, line):
        self.count += 1
        os.write(self.fd, line.encode() + b"\x14")  # ^T: the capturing widget
        path = os.path.join(self.out, f"{self.count}.out")
        deadline = time.monotonic() + self.timeout
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"zsh gave no completion for {line!r}; screen so far:\n"
                    + self.screen.decode(errors="replace")[-2000:])
            time.sleep(0.02)  # the poll's interval; the deadline above bounds the wait
        os.write(self.fd, b"\x15")  # ^U: clear the line for the next query
        with open(path) as f:
            return sorted(set(f.read().split("\n")) - {""})

    def __exit__(self, *exc):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        os.close(self.fd)
        shutil.rmtree(self.dir, ignore_errors=True)
        return False
