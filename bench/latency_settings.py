"""Settings of bench/latency.py's Celery workers in the steady mode with ``--detail``: the
project's own plus the bench's probe (`bench.latency_probe`) when ``LATENCY_PROBE`` names the file
it appends to. Production code carries no probe."""

import os

from config.settings import *  # noqa: F403

if os.environ.get("LATENCY_PROBE"):
    from bench.latency_probe import install

    install(os.environ["LATENCY_PROBE"])
