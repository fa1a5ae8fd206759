"""The stand-ins' device clock: every operation advances it by STEP_MS."""

import os

STEP_MS = 0.5
_now = [0.0]


def tick(ms=STEP_MS):
    _now[0] += ms


def now():
    return _now[0]


def devices():
    return int(os.environ.get("FAKE_CUDA_DEVICES", "1"))
