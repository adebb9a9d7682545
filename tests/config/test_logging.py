import json
import logging
import sys
from pathlib import Path
from typing import cast

from django.conf import settings as django_settings

from agents.redaction import redact
from config.logging import REDACTED, EventFormatter, JsonEventFormatter


def make_record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "agents", logging.INFO, __file__, 1, "llm_response_parse_retry", None, None
    )
    record.__dict__.update(extra)
    return record


def test_one_line_with_event_and_key_fields() -> None:
    line = EventFormatter().format(make_record(session_id=7, agent="triagem", code=1))
    assert line.split(" ", 2)[2] == (
        "INFO agents llm_response_parse_retry session_id=7 agent=triagem code=1"
    )


def test_secrets_are_redacted_and_spaces_quoted() -> None:
    line = EventFormatter().format(
        make_record(api_key="sk-123", access_token="EAAG", detail='tem "aspas" e espaço')
    )
    assert line.endswith(
        f'api_key={REDACTED} access_token={REDACTED} detail="tem \\"aspas\\" e espaço"'
    )


def test_django_request_objects_are_not_dumped() -> None:
    line = EventFormatter().format(
        make_record(request=object(), server_time="30/Nov/2026 11:24:35", status_code=200)
    )
    assert line.endswith("llm_response_parse_retry status_code=200")


def test_every_value_is_redacted_the_message_and_each_extra() -> None:
    record = logging.LogRecord(
        "openai", logging.WARNING, __file__, 1, "retrying for %s", ("ana@x.com.br",), None
    )
    record.__dict__.update(
        error="HTTP 401: Incorrect API key provided: sk-proj-SENTINEL0123456789abcdef.",
        title="Malformed access token EAAGSENTINEL0123456789abcdefXYZ",
        detail={"documento": "529.982.247-25", "telefone": "+55 11 98765-4321"},
        session_id=7,
        wamid="wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjQ5",
    )

    line = EventFormatter().format(record)

    assert line.split(" ", 2)[2] == (
        "WARNING openai retrying for [email] "
        'error="HTTP 401: Incorrect API key provided: sk-[redacted]." '
        'title="Malformed access token EAA[redacted]" '
        "detail=\"{'documento': '[cpf]', 'telefone': '[phone]'}\" "
        "session_id=7 wamid=wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjQ5"
    )


def test_a_value_is_redacted_before_its_newlines_are_escaped() -> None:
    # Escaped first, "\nsk-..." would become "\\nsk-..." and the key would lose its boundary.
    line = EventFormatter().format(make_record(error="first line\nsk-SENTINEL0123456789abcdef"))

    assert line.endswith('error="first line\\nsk-[redacted]"')


def test_a_traceback_is_redacted() -> None:
    try:
        raise ValueError("Bearer SENTINELabcdef123456 refused for 11987654321")
    except ValueError:
        record = logging.LogRecord(
            "celery", logging.ERROR, __file__, 1, "task_failed", None, sys.exc_info()
        )

    lines = EventFormatter().format(record).splitlines()

    assert lines[0].split(" ", 2)[2] == "ERROR celery task_failed"
    assert lines[-1] == "ValueError: Bearer [redacted] refused for [phone]"
    assert "SENTINEL" not in "\n".join(lines)


def test_a_traceback_cached_unredacted_by_another_formatter_is_redacted() -> None:
    try:
        raise ValueError("EAAGSENTINEL0123456789abcdefXYZ")
    except ValueError:
        record = logging.LogRecord(
            "django", logging.ERROR, __file__, 1, "request_failed", None, sys.exc_info()
        )
    logging.Formatter().format(record)  # caches record.exc_text as it is

    line = EventFormatter().format(record)

    assert line.splitlines()[-1] == "ValueError: EAA[redacted]"


def test_a_large_integer_is_redacted_like_text() -> None:
    line = EventFormatter().format(make_record(count=3, wa_id=5511987654321, cnpj=11222333000181))

    assert line.endswith("count=3 wa_id=[phone] cnpj=[cnpj]")


def test_json_lines_carry_the_event_its_fields_and_redact_like_the_text_lines() -> None:
    formatter = JsonEventFormatter()
    record = make_record(
        session_id=7, agent="triagem", api_key="sk-123", detail="e-mail ana@x.com.br", ok=True
    )

    document = json.loads(formatter.format(record))

    assert set(document) == {
        "time",
        "level",
        "logger",
        "event",
        "session_id",
        "agent",
        "api_key",
        "detail",
        "ok",
    }
    assert {k: v for k, v in document.items() if k != "time"} == {
        "level": "INFO",
        "logger": "agents",
        "event": "llm_response_parse_retry",
        "session_id": 7,
        "agent": "triagem",
        "api_key": REDACTED,
        "detail": "e-mail " + redact("ana@x.com.br"),
        "ok": True,
    }
    assert "ana@x.com.br" not in formatter.format(record)


def test_a_json_line_holds_the_redacted_traceback_on_one_line() -> None:
    try:
        raise ValueError("falhou para ana@x.com.br")
    except ValueError:
        record = logging.LogRecord(
            "conversations", logging.ERROR, __file__, 1, "turn_failed", None, sys.exc_info()
        )

    line = JsonEventFormatter().format(record)

    assert "\n" not in line
    document = json.loads(line)
    assert document["event"] == "turn_failed"
    assert document["exception"].splitlines()[0] == "Traceback (most recent call last):"
    assert document["exception"].splitlines()[-1] == (
        f"ValueError: falhou para {redact('ana@x.com.br')}"
    )


def test_every_package_of_the_project_logs_at_log_level() -> None:
    # A package without its logger logs WARNING and above only: its INFO events would be lost.
    root = Path(__file__).resolve().parents[2]
    packages = sorted(
        path.parent.name
        for path in root.glob("*/__init__.py")
        if path.parent.name not in {"tests", "bench", "typings"}
    )

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
    loggers = cast(dict[str, dict[str, str]], django_settings.LOGGING["loggers"])
    assert {name: loggers[name]["level"] for name in packages} == {
        name: "INFO" for name in packages
    }
