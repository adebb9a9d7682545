"""Static files in production: `collectstatic` writes hashed, compressed copies and the WSGI
application itself serves them (WhiteNoise) with DEBUG=False; the admin's pages link the hashed
names. Run in a subprocess with the production settings module."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import BASE_DIR, collected_static_root, production_env

pytestmark = pytest.mark.slow

# Calls the WSGI application as a server would and prints what it answered, per path.
SERVE = """
import json, sys
from io import BytesIO
from wsgiref.util import setup_testing_defaults
from config.wsgi import application

answers = {}
for path in sys.argv[1:]:
    environ = {"PATH_INFO": path, "HTTP_ACCEPT_ENCODING": "gzip", "HTTP_HOST": "127.0.0.1"}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = BytesIO()
    seen = {}
    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)
    body = b"".join(application(environ, start_response))
    html = seen["headers"].get("Content-Type", "").startswith("text/html")
    answers[path] = {**seen, "length": len(body), "html": body.decode() if html else ""}
print(json.dumps(answers))
"""


def serve(*paths: str) -> dict[str, dict[str, object]]:
    env = production_env(
        STATIC_ROOT=collected_static_root(),
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        DATABASE_URL="sqlite:///:memory:",
    )
    done = subprocess.run(
        [sys.executable, "-c", SERVE, *paths],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    answers: dict[str, dict[str, object]] = json.loads(done.stdout)
    return answers


def hashed_name(original: str) -> str:
    manifest = json.loads((Path(collected_static_root()) / "staticfiles.json").read_text())
    name: str = manifest["paths"][original]
    return name


def test_collectstatic_writes_hashed_and_compressed_copies_of_the_admin_css() -> None:
    hashed = hashed_name("admin/css/base.css")
    root = Path(collected_static_root())

    assert re.fullmatch(r"admin/css/base\.[0-9a-f]{12}\.css", hashed) is not None
    assert (root / hashed).is_file()
    assert (root / f"{hashed}.gz").is_file()


def test_the_wsgi_application_serves_the_admin_css_with_debug_off() -> None:
    hashed = hashed_name("admin/css/base.css")

    answers = serve("/static/admin/css/base.css", f"/static/{hashed}", "/static/admin/none.css")

    plain, versioned, missing = answers.values()
    assert plain["status"] == "200 OK"
    assert plain["headers"]["Content-Type"] == 'text/css; charset="utf-8"'  # type: ignore[index]
    assert plain["headers"]["Content-Encoding"] == "gzip"  # type: ignore[index]
    assert versioned["status"] == "200 OK"
    # A hashed name never changes content: cached for ten years.
    assert versioned["headers"]["Cache-Control"] == (  # type: ignore[index]
        "max-age=315360000, public, immutable"
    )
    assert missing["status"] == "404 Not Found"


def test_the_login_page_links_the_hashed_stylesheet() -> None:
    hashed = hashed_name("admin/css/base.css")

    [login] = serve("/admin/login/").values()

    assert login["status"] == "200 OK"
    assert f'href="/static/{hashed}"' in str(login["html"])
