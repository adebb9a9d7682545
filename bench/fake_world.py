"""What the benches that run against the fake model share: Django set up with the test settings,
the tests' fake OpenAI server (a local HTTP server, reached through the real openai SDK) and a
fake Graph API, and a throwaway test database (in memory on SQLite, ``test_<name>`` on
PostgreSQL) dropped at the end."""

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class World:
    model: Any  # tests.fakes.openai_server.FakeOpenAIServer
    database: str  # the vendor and the test database's name, as the figures print it


@contextmanager
def fake_world(**settings: Any) -> Iterator[World]:
    """The world, with `settings` over the test settings while it lasts."""
    # Set here, not on import: tests/bench imports the benches, and the processes its suite
    # starts would inherit them.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    import django

    django.setup()
    # The fake servers' access log, one line per call, would bury the figures.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    from django.db import connection
    from django.test.utils import override_settings
    from pytest_httpserver import HTTPServer

    from tests.fakes.graph_server import FakeGraphAPI
    from tests.fakes.openai_server import FakeOpenAIServer

    servers = [HTTPServer(host="127.0.0.1", port=0, threaded=True) for _ in range(2)]
    for server in servers:
        server.start()
    model = FakeOpenAIServer(servers[0])
    graph = FakeGraphAPI(servers[1])
    overrides = override_settings(
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="bench-openai-key",
        WHATSAPP_API_BASE_URL=graph.base_url,
        REPLAY_MAX_COST_USD=100.0,
        **settings,
    )
    overrides.enable()
    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        yield World(model=model, database=f"{connection.vendor} ({test_db})")
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)
        overrides.disable()
        for server in servers:
            server.stop()
