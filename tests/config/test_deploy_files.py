"""The deployment files in deploy/ run what the operator guide's Production section
(docs/operations.md) documents: the systemd units its commands (web, the four per-queue workers,
beat), the one-machine compose file the same web and beat and the one worker for every queue (only
gunicorn's bind address differs in a container); every variable they set is one the operator
guide documents, and nginx overwrites the forwarded headers."""

import re
import shlex
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
WORKERS = ("worker-turns", "worker-sends", "worker-other", "worker-replays")
PROCESSES = ("web", *WORKERS, "beat")
ONE_MACHINE = ("web", "worker", "beat")
PRODUCTION = OPERATIONS.split("\n## Production\n", 1)[1].split("\n## ", 1)[0]


def guide_commands() -> dict[str, list[str]]:
    """The Production block's gunicorn / celery worker / celery beat lines, as argv; a worker
    is named after its --hostname (``turns@%h`` -> worker-turns)."""
    block = PRODUCTION.split("```sh", 1)[1].split("```", 1)[0]
    commands: dict[str, list[str]] = {}
    for line in block.splitlines():
        if not line.startswith(("gunicorn ", "celery ")):
            continue
        argv = shlex.split(line.split("#", 1)[0])
        if argv[:1] == ["gunicorn"]:
            commands["web"] = argv
        elif argv[:4] == ["celery", "-A", "config", "worker"]:
            hostname = argv[argv.index("--hostname") + 1]
            commands[f"worker-{hostname.split('@')[0]}"] = argv
        elif argv[:4] == ["celery", "-A", "config", "beat"]:
            commands["beat"] = argv
    return commands


def guide_one_machine_commands() -> dict[str, list[str]]:
    """Web and beat as in production, and the worker for every queue (the second block)."""
    block = PRODUCTION.split("```sh", 2)[2].split("```", 1)[0]
    [worker] = [shlex.split(line) for line in block.splitlines() if line.startswith("celery ")]
    commands = guide_commands()
    return {"web": commands["web"], "worker": worker, "beat": commands["beat"]}


def without_bind(argv: list[str]) -> list[str]:
    """The command with gunicorn's --bind value blanked: 127.0.0.1 behind nginx, 0.0.0.0 inside
    a container."""
    return ["*" if i > 0 and argv[i - 1] == "--bind" else part for i, part in enumerate(argv)]


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return document


def unit(process: str) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / f"lab-attendance-{process}.service").read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            fields.setdefault(key, []).append(value)
    return fields


def documented(variable: str) -> bool:
    return f"`{variable}`" in OPERATIONS


def test_the_guide_documents_the_three_processes() -> None:
    assert set(guide_commands()) == set(PROCESSES)


def test_the_guide_workers_cover_every_queue_once() -> None:
    queues = [
        queue
        for process in WORKERS
        for queue in guide_commands()[process][
            guide_commands()[process].index("--queues") + 1
        ].split(",")
    ]

    assert sorted(queues) == sorted(q.name for q in settings.CELERY_TASK_QUEUES)
    assert "--queues" not in guide_one_machine_commands()["worker"]


def test_compose_runs_the_guide_one_machine_commands() -> None:
    services = compose()["services"]
    expected = guide_one_machine_commands()

    assert expected["worker"] == ["celery", "-A", "config", "worker", "--loglevel=INFO"]
    for process in ONE_MACHINE:
        assert without_bind(shlex.split(services[process]["command"])) == without_bind(
            expected[process]
        ), process


def test_the_systemd_units_run_the_guide_commands_from_the_venv() -> None:
    expected = guide_commands()

    for process in PROCESSES:
        [exec_start] = unit(process)["ExecStart"]
        argv = shlex.split(exec_start.replace("%%", "%"))  # systemd's escape of a literal %
        assert argv[0] == f"/srv/lab-attendance/.venv/bin/{expected[process][0]}"
        assert argv[1:] == expected[process][1:], process


def test_every_variable_the_deploy_files_set_is_documented() -> None:
    services = compose()["services"]
    variables = {name for s in services.values() for name in s.get("environment", {}) or {}}
    variables -= {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"}  # the postgres image's
    example = (DEPLOY / "env.example").read_text()
    variables |= set(re.findall(r"^([A-Z_]+)=", example, flags=re.MULTILINE))
    for process in PROCESSES:
        for setting in unit(process).get("Environment", []):
            variables.add(setting.split("=", 1)[0])

    assert sorted(v for v in variables if not documented(v)) == []
    assert {"DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "FIELD_ENCRYPTION_KEYS"} <= variables


def test_beat_keeps_its_schedule_on_persistent_disk_in_both() -> None:
    beat = compose()["services"]["beat"]

    assert beat["environment"]["CELERY_BEAT_SCHEDULE_FILENAME"] == "/var/lib/beat/beat-schedule"
    assert beat["volumes"] == ["beat:/var/lib/beat"]
    assert unit("beat")["Environment"] == [
        "CELERY_BEAT_SCHEDULE_FILENAME=/var/lib/lab-attendance/beat-schedule"
    ]
    assert unit("beat")["StateDirectory"] == ["lab-attendance"]


def test_nginx_overwrites_the_forwarded_headers_and_buffers_bodies() -> None:
    site = (DEPLOY / "nginx" / "lab-attendance.conf").read_text()

    assert "proxy_set_header X-Forwarded-Proto $scheme;" in site
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in site
    assert "$proxy_add_x_forwarded_for" not in site.split("#")[0]
    assert "proxy_request_buffering on;" in site
    assert re.search(r"client_max_body_size 7m;", site) is not None


def test_nginx_lets_the_staff_file_sends_through_above_whatsapp_s_100_mb() -> None:
    site = (DEPLOY / "nginx" / "lab-attendance.conf").read_text()
    location = re.search(r"location ~ (\S+) \{([^}]*)\}", site)

    assert location is not None
    assert re.fullmatch(location.group(1), "/admin/conversations/session/42/send-file/")
    assert re.fullmatch(location.group(1), "/admin/conversations/session/42/reply/") is None
    assert "client_max_body_size 101m;" in location.group(2)
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in location.group(2)


def test_the_image_copies_every_package_the_project_installs() -> None:
    # pip installs the packages pyproject.toml lists; the image must hold each of them, or an
    # app in INSTALLED_APPS is missing at start.
    pyproject = (ROOT / "pyproject.toml").read_text()
    include = re.search(r"^include = \[(.*)\]$", pyproject, re.MULTILINE)
    assert include is not None
    packages = sorted(name.strip('" *') for name in include.group(1).split(","))
    dockerfile = (ROOT / "deploy/Dockerfile").read_text()
    copied = sorted(re.findall(r"^COPY (\w+) \1$", dockerfile, re.MULTILINE))

    assert packages == [
        "agents",
        "compat",
        "config",
        "conversations",
        "governance",
        "knowledge_base",
        "prompts_admin",
        "simulator",
        "staff_auth",
        "support",
        "versioning",
        "whatsapp",
    ]
    assert copied == sorted([*packages, "locale", "templates"])
