"""A script that never asks for gradients: it prints, then waits forever."""

import time

print("waiting for data that never comes", flush=True)
while True:
    time.sleep(0.5)
