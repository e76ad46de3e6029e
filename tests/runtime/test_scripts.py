"""labsupport.runtime.scripts.exit_now: a rank's process ends with its program's code and output."""

import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_exit_now_keeps_the_exit_code_and_every_line_printed_before_it():
    done = run(
        "import logging, sys\n"
        "from labsupport.runtime.scripts import exit_now\n"
        "logging.basicConfig(stream=sys.stderr)\n"
        "print('rank 0: done', end='')\n"  # no newline: still in stdout's buffer (a pipe)
        "logging.warning('a last warning')\n"
        "exit_now(3)\n"
        "print('never reached')\n"
    )
    assert (done.returncode, done.stdout) == (3, "rank 0: done")
    assert "a last warning" in done.stderr


def test_exit_now_with_none_exits_zero_as_sys_exit_does():
    done = run("from labsupport.runtime.scripts import exit_now\nexit_now(None)")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
