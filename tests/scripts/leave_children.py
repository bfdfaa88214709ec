"""Start processes that outlive the import of a script, and record their pids for the test.

The test names the record file in GRADCHECK_TEST_PIDS; the last line written is "ready".
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

# A daemon the classic way: its parent exits and it leaves the session, so only its
# environment still ties it to the worker.
DAEMON = """
import os, time
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
print(os.getpid(), flush=True)
while True:
    time.sleep(60)
"""
SLEEPER = "import time\nwhile True:\n    time.sleep(60)"


def leave_children() -> None:
    """A forked child, a child in its own session and a daemon: none of them ever ends."""
    forked = os.fork()
    if forked == 0:
        try:
            while True:
                time.sleep(60)
        finally:
            os._exit(0)
    session = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    starter = subprocess.Popen([sys.executable, "-c", DAEMON], stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    daemon = int(starter.stdout.readline())
    starter.wait()
    record(os.getpid(), forked, session.pid, daemon)
    record("ready")


def record(*lines: object) -> None:
    with Path(os.environ["GRADCHECK_TEST_PIDS"]).open("a") as pids:
        pids.write("".join(f"{line}\n" for line in lines))
