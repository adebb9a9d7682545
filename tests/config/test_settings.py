"""Settings behave as documented: production safety, `check --deploy`, `.env` loading."""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "DEBUG": "False",
    "SECRET_KEY": "prod-" + "k" * 60,
    "WHATSAPP_APP_SECRET": "meta-app-secret",
    "FIELD_ENCRYPTION_KEYS": "cHJvZC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=",
    "ALLOWED_HOSTS": "atendimento.example.com.br",
    "DATABASE_URL": "sqlite:///:memory:",
}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    isolated = {
        "DEBUG",
        "SECRET_KEY",
        "WHATSAPP_APP_SECRET",
        "FIELD_ENCRYPTION_KEYS",
        "DATABASE_URL",
        "CELERY_BROKER_URL",
    }
    base = {k: v for k, v in os.environ.items() if k not in isolated}
    base.update({"DJANGO_SETTINGS_MODULE": "config.settings", "ENV_FILE": "/nonexistent/.env"})
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=base, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("missing", ["SECRET_KEY", "WHATSAPP_APP_SECRET", "FIELD_ENCRYPTION_KEYS"])
def test_production_refuses_to_start_without_a_secret(missing: str) -> None:
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != missing}
    result = run_python("import django; django.setup()", env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"django.core.exceptions.ImproperlyConfigured: {missing} is not set. "
        "It is required when DEBUG=False; set it in the environment or .env."
    )


def test_debug_runs_without_secrets() -> None:
    result = run_python(
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DEBUG, settings.CELERY_TASK_ALWAYS_EAGER, settings.SECRET_KEY[:15])",
        {"DEBUG": "True"},
    )
    assert result.stdout.strip() == "True True django-insecure"


@pytest.mark.parametrize(
    ("keys", "position"),
    [("not-a-key", 1), ("cHJvZC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=,c2hvcnQ=", 2)],
)
def test_production_refuses_a_field_encryption_key_that_is_not_a_fernet_key(
    keys: str, position: int
) -> None:
    result = run_python(
        "import django; django.setup()", PRODUCTION_ENV | {"FIELD_ENCRYPTION_KEYS": keys}
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"django.core.exceptions.ImproperlyConfigured: FIELD_ENCRYPTION_KEYS: key {position} is "
        "not a Fernet key (32 url-safe base64-encoded bytes). Generate one with: python -c "
        '"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
    )


def test_field_encryption_keys_are_a_list_and_debug_derives_one_from_secret_key() -> None:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(' '.join(s.FIELD_ENCRYPTION_KEYS))"
    )
    two = (
        "cHJvZC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=, b2xkLWZpZWxkLWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM="
    )
    assert run_python(code, PRODUCTION_ENV | {"FIELD_ENCRYPTION_KEYS": two}).stdout.split() == [
        "cHJvZC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=",
        "b2xkLWZpZWxkLWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM=",
    ]
    derived = base64.urlsafe_b64encode(
        hashlib.sha256(b"field-encryption:dev-secret").digest()
    ).decode()
    result = run_python(code, {"DEBUG": "True", "SECRET_KEY": "dev-secret"})
    assert result.stdout.split() == [derived]


def test_check_deploy_is_clean_with_the_documented_production_environment() -> None:
    result = run_python(
        "import sys; from django.core.management import execute_from_command_line; "
        "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])",
        PRODUCTION_ENV,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "System check identified no issues (1 silenced)."


def test_env_file_is_read_and_the_process_environment_wins(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(
        "DEBUG=True\nAGENT_NAME=Clara\nMAX_AGENT_HOPS_PER_MESSAGE=5\nSESSION_IDLE_HOURS=12\n"
    )
    result = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DEBUG, s.AGENT_NAME, s.MAX_AGENT_HOPS_PER_MESSAGE, s.SESSION_IDLE_HOURS)",
        {"ENV_FILE": str(env_file), "SESSION_IDLE_HOURS": "6"},
    )
    assert result.stdout.strip() == "True Clara 5 6"


def test_defaults_of_the_documented_variables() -> None:
    result = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.OPENAI_MODEL_TRIAGE, "
        "s.OPENAI_MODEL_QUALIFICATION, s.OPENAI_MODEL_COLLECTION, s.OPENAI_MODEL_SUMMARY, "
        "s.LLM_RETRY_MAX, s.MAX_HISTORY_MESSAGES, s.MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE, "
        "s.MAX_AGENT_HOPS_PER_MESSAGE, s.SESSION_IDLE_HOURS, s.WEBHOOK_MAX_BODY_BYTES, "
        "s.LANGUAGE_CODE, s.TIME_ZONE, s.USE_TZ)",
        {"DEBUG": "True", "DATABASE_URL": "", "CELERY_BROKER_URL": ""},
    )
    assert result.stdout.split() == [
        "django.db.backends.sqlite3", "True", "gpt-4o-mini", "gpt-4o-mini", "gpt-4o-mini",
        "gpt-4o-mini", "1", "50", "2", "3", "24", "5242880", "pt-br", "America/Sao_Paulo", "True",
    ]  # fmt: skip


def test_a_broker_url_turns_eager_mode_off_and_postgres_keeps_connections() -> None:
    result = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.CELERY_TASK_ALWAYS_EAGER, s.DATABASES['default']['CONN_MAX_AGE'], "
        "s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'] > s.CELERY_TASK_TIME_LIMIT)",
        {
            "DEBUG": "True",
            "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
            "DATABASE_URL": "postgres://u@127.0.0.1:5432/x",
        },
    )
    assert result.stdout.split() == ["False", "60", "True"]


def test_a_worker_s_connection_pool_is_read_from_the_environment() -> None:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASE_WORKER_POOL)"
    )
    postgres = {"DEBUG": "True", "DATABASE_URL": "postgres://u@127.0.0.1:5432/x"}

    assert run_python(code, postgres).stdout.strip() == (
        "{'min_size': 1, 'max_size': 8, 'timeout': 30.0}"
    )
    assert run_python(code, {**postgres, "DB_POOL_MAX_SIZE": "0"}).stdout.strip() == "None"
    assert run_python(code, {**postgres, "DB_POOL_MAX_SIZE": "2", "DB_POOL_MIN_SIZE": "4",
                             "DB_POOL_TIMEOUT": "5"}).stdout.strip() == (
        "{'min_size': 2, 'max_size': 2, 'timeout': 5.0}"
    )  # fmt: skip


def test_sqlite_has_no_pool_and_the_worker_defaults_to_threads() -> None:
    result = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASE_WORKER_POOL, s.CELERY_WORKER_POOL, s.CELERY_WORKER_CONCURRENCY)",
        {"DEBUG": "True", "DATABASE_URL": ""},
    )
    assert result.stdout.split() == ["None", "threads", "200"]


def test_a_prefork_worker_defaults_to_one_process_per_core() -> None:
    result = run_python(
        "import os, django; django.setup(); from django.conf import settings as s; "
        "print(s.CELERY_WORKER_POOL, s.CELERY_WORKER_CONCURRENCY == os.cpu_count())",
        {"DEBUG": "True", "CELERY_WORKER_POOL": "prefork"},
    )
    assert result.stdout.split() == ["prefork", "True"]


def test_every_variable_settings_reads_is_documented() -> None:
    settings_source = (ROOT / "config" / "settings.py").read_text()
    variables = sorted(
        set(re.findall(r'env\.(?:str|bool|int|float|list)\(\s*"([A-Z_]+)"', settings_source))
    )
    operations = (ROOT / "docs" / "operations.md").read_text()
    configuration = operations.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    example = (ROOT / ".env.example").read_text()

    assert len(variables) == 92
    assert [v for v in variables if f"`{v}`" not in configuration] == []
    assert [v for v in variables if v not in example] == []


@pytest.mark.parametrize(
    ("url", "secret"),
    [("HANDOFF_WEBHOOK_URL", "HANDOFF_WEBHOOK_SECRET"), ("CRM_WEBHOOK_URL", "CRM_WEBHOOK_SECRET")],
)
def test_production_refuses_a_webhook_url_without_its_secret(url: str, secret: str) -> None:
    env = PRODUCTION_ENV | {url: "https://hooks.example.com/x", "SITE_URL": "https://a.example"}

    result = run_python("import django; django.setup()", env)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"django.core.exceptions.ImproperlyConfigured: {url} is set but {secret} is not: the "
        "POSTs are signed with it. It is required when DEBUG=False; set it in the environment "
        "or .env."
    )


def test_production_refuses_alerts_without_a_site_url_and_e_mails_without_a_mail_server() -> None:
    hook = {"CRM_WEBHOOK_URL": "https://crm.example.com/leads", "CRM_WEBHOOK_SECRET": "s"}
    no_site = run_python("import django; django.setup()", PRODUCTION_ENV | hook)
    emails = {"HANDOFF_NOTIFY_EMAILS": "equipe@lab.example", "SITE_URL": "https://a.example"}
    no_mail = run_python("import django; django.setup()", PRODUCTION_ENV | emails)

    assert no_site.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: SITE_URL is not set: the alerts and the CRM "
        "payload link to the admin with it (e.g. https://atendimento.example.com.br). It is "
        "required when DEBUG=False."
    )
    assert no_mail.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: HANDOFF_NOTIFY_EMAILS is set but EMAIL_URL "
        "is not: the alerts would only reach the console. Set EMAIL_URL (e.g. "
        "smtp+tls://user:password@host:587)."
    )


def test_a_webhook_url_must_be_http() -> None:
    result = run_python(
        "import django; django.setup()", {"DEBUG": "True", "CRM_WEBHOOK_URL": "ftp://crm/x"}
    )
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: CRM_WEBHOOK_URL must be an http:// or "
        "https:// URL."
    )


@pytest.mark.parametrize(
    ("value", "read"),
    [(None, "10.0"), ("0.1", "0.1"), ("2.5", "2.5"), ("60", "60.0")],
    ids=["default", "just-above-0", "a-fraction", "the-maximum"],
)
def test_the_signed_post_s_deadline_is_read_from_the_environment(
    value: str | None, read: str
) -> None:
    env = {"DEBUG": "True"} | ({} if value is None else {"SIGNED_POST_TIMEOUT_SECONDS": value})

    result = run_python(
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SIGNED_POST_TIMEOUT_SECONDS)",
        env,
    )

    assert result.stdout.strip() == read


@pytest.mark.parametrize("value", ["0", "-1", "60.01", "600"])
def test_a_signed_post_deadline_out_of_range_refuses_to_start(value: str) -> None:
    result = run_python(
        "import django; django.setup()", {"DEBUG": "True", "SIGNED_POST_TIMEOUT_SECONDS": value}
    )

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: SIGNED_POST_TIMEOUT_SECONDS must be more "
        f"than 0 and at most 60 seconds (it is {float(value):g})."
    )


def test_alert_and_mail_settings_are_read_and_debug_allows_an_unsigned_webhook() -> None:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.HANDOFF_NOTIFY_EMAILS, s.SITE_URL, s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, "
        "s.EMAIL_USE_TLS, s.DEFAULT_FROM_EMAIL, repr(s.HANDOFF_WEBHOOK_SECRET))"
    )
    production = run_python(
        code,
        PRODUCTION_ENV
        | {
            "HANDOFF_NOTIFY_EMAILS": "equipe@lab.example,plantao@lab.example",
            "EMAIL_URL": "smtp+tls://alerts:pw@mail.example.com:587",
            "DEFAULT_FROM_EMAIL": "atendimento@lab.example",
            "SITE_URL": "https://atendimento.example.com.br/",
            "HANDOFF_WEBHOOK_URL": "https://hooks.example.com/x",
            "HANDOFF_WEBHOOK_SECRET": "s3",
        },
    )
    debug = run_python(code, {"DEBUG": "True", "HANDOFF_WEBHOOK_URL": "http://127.0.0.1:9/x"})

    assert production.stdout.strip() == (
        "['equipe@lab.example', 'plantao@lab.example'] https://atendimento.example.com.br "
        "django.core.mail.backends.smtp.EmailBackend mail.example.com 587 True "
        "atendimento@lab.example 's3'"
    )
    assert debug.stdout.strip() == (
        "[] http://127.0.0.1:8000 django.core.mail.backends.console.EmailBackend localhost 25 "
        "False atendimento@localhost ''"
    )


def test_log_format_json_makes_one_json_object_per_line() -> None:
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('conversations').info('turn_done', extra={'session_id': 7})"
    )
    result = run_python(code, {**PRODUCTION_ENV, "LOG_FORMAT": "json"})

    [line] = result.stderr.strip().splitlines()
    document = json.loads(line)
    assert {k: v for k, v in document.items() if k != "time"} == {
        "level": "INFO",
        "logger": "conversations",
        "event": "turn_done",
        "session_id": 7,
    }


@pytest.mark.parametrize(
    ("log_level", "shown"),
    [
        ("INFO", ["ERROR trace failed"]),
        ("DEBUG", ["INFO strategy received", "INFO trace succeeded", "ERROR trace failed"]),
    ],
)
def test_celery_s_per_task_lines_show_only_at_debug_and_its_failures_always(
    log_level: str, shown: list[str]
) -> None:
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('celery.worker.strategy').info('received'); "
        "logging.getLogger('celery.app.trace').info('succeeded'); "
        "logging.getLogger('celery.app.trace').error('failed'); "
        "logging.getLogger('celery.worker.consumer').info('ready')"
    )
    result = run_python(code, {**PRODUCTION_ENV, "LOG_FORMAT": "json", "LOG_LEVEL": log_level})

    lines = [json.loads(line) for line in result.stderr.strip().splitlines()]
    assert [f"{d['level']} {d['logger'].rsplit('.', 1)[1]} {d['event']}" for d in lines] == [
        *shown,
        "INFO consumer ready",
    ]


def test_an_unknown_log_format_refuses_to_start() -> None:
    result = run_python("import django; django.setup()", {**PRODUCTION_ENV, "LOG_FORMAT": "xml"})

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: LOG_FORMAT='xml': use 'text' or 'json'."
    )


def test_beat_keeps_its_schedule_outside_the_checkout_unless_told_where() -> None:
    code = (
        "import django; django.setup(); from config.celery import app; "
        "print(app.conf.beat_schedule_filename)"
    )
    default = run_python(code, PRODUCTION_ENV).stdout.strip()
    chosen = run_python(
        code, {**PRODUCTION_ENV, "CELERY_BEAT_SCHEDULE_FILENAME": "/var/lib/lab/beat-schedule"}
    ).stdout.strip()

    assert default == str(Path(tempfile.gettempdir()) / "lab-attendance-celerybeat-schedule")
    assert not Path(default).is_relative_to(ROOT)
    assert chosen == "/var/lib/lab/beat-schedule"


def test_the_media_storage_is_read_from_the_environment() -> None:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.STORAGES['default'])"
    )
    s3 = {
        "DEBUG": "True",
        "MEDIA_STORAGE_BACKEND": "storages.backends.s3.S3Storage",
        "MEDIA_STORAGE_OPTIONS": '{"bucket_name": "media", "endpoint_url": "https://s3.example"}',
    }

    assert run_python(code, {"DEBUG": "True"}).stdout.strip() == (
        "{'BACKEND': 'django.core.files.storage.FileSystemStorage', 'OPTIONS': {}}"
    )
    assert run_python(code, s3).stdout.strip() == (
        "{'BACKEND': 'storages.backends.s3.S3Storage', "
        "'OPTIONS': {'bucket_name': 'media', 'endpoint_url': 'https://s3.example'}}"
    )


@pytest.mark.parametrize("options", ['{"bucket_name": ', '["media"]'])
def test_media_storage_options_that_are_not_a_json_object_refuse_to_start(options: str) -> None:
    result = run_python(
        "import django; django.setup()", {"DEBUG": "True", "MEDIA_STORAGE_OPTIONS": options}
    )

    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "django.core.exceptions.ImproperlyConfigured: MEDIA_STORAGE_OPTIONS is not a JSON object"
        )
    )
