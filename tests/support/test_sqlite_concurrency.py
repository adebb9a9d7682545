"""On SQLite, two staff actions at once both answer (a change or a refusal in pt-BR), never
"database is locked": the second waits for the first's write lock (config/settings.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_staff_actions_at_once_on_a_sqlite_file_both_answer(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "True",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }

    result = subprocess.run(
        [sys.executable, "-m", "tests.helpers.sqlite_concurrency"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    # Ten rounds of a take-over and a close: whichever runs second changes the closed or
    # taken-over session, or is refused; neither fails.
    assert len(answers) == 20
    assert [a for a in answers if a not in {"changed", "refused"}] == []
