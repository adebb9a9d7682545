"""Settings of bench/worker_cpu.py's Celery worker: the project's own (with the bench's broker key
prefix, `tests.helpers.broker_settings`) plus the bench's probe (`bench.worker_cpu_probe`) when
``WORKER_CPU_STATS`` names the file it writes. Production code carries no profiling hook."""

import os

from tests.helpers.broker_settings import *  # noqa: F403

if os.environ.get("WORKER_CPU_STATS"):
    from bench.worker_cpu_probe import install

    install(
        os.environ["WORKER_CPU_STATS"],
        profile_path=os.environ.get("WORKER_CPU_PROFILE", ""),
        sql=bool(os.environ.get("WORKER_CPU_SQL")),
    )
