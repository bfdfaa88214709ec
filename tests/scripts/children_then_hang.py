"""Leaves processes that never end, then never finishes its own import."""

import time

from leave_children import leave_children

leave_children()
while True:
    time.sleep(0.1)
