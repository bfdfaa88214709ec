"""Records its parent, leaves processes (one a daemon forked without a new program, so its
environment as the kernel shows it is its parent's start-up one), then never finishes."""

import os
import time

from leave_children import leave_children, record


def forked_daemon() -> int:
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, f"{os.getpid()}\n".encode())
            while True:
                time.sleep(60)
        os._exit(0)
    os.close(write)
    daemon = int(os.read(read, 64))
    os.wait()
    return daemon


record(f"parent={os.getppid()}", forked_daemon())
leave_children()
while True:
    time.sleep(0.1)
