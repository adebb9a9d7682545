"""One log line per event: `<time> <level> <logger> <event> key=value ...`, or with
``LOG_FORMAT=json`` one JSON object per line (`JsonEventFormatter`) for a log shipper.

Callers log the event name as the message and the key fields as `extra`:
``logger.info("llm_response_parse_retry", extra={"session_id": 7, "agent": "triagem"})``.
Values of keys that look like secrets are replaced, so an API key or the app secret passed by
mistake never reaches the log. Every other value — the message, each extra, a traceback — goes
through `agents.redaction.redact`, so a CPF, a CNPJ, an e-mail, a phone number or a credential
echoed in a provider's error is masked whichever logger wrote it (Django's, Celery's, a
library's).
"""

import functools
import json
import logging
import re
from typing import Any

from agents.redaction import redact

_STANDARD_ATTRS = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "taskName"}
)
_SECRET_MARKERS = ("secret", "token", "api_key", "apikey", "password", "authorization")
# Extras Django attaches that repeat the message (django.server) or hold whole objects (a socket,
# an HttpRequest with its headers): never useful on the line, sometimes personal data.
_SKIPPED_EXTRAS = frozenset({"request", "server_time"})
REDACTED = "[redacted]"
_NEEDS_QUOTES = re.compile(r'[\s"]')


@functools.lru_cache(maxsize=1024)
def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def _format_value(value: Any) -> str:
    if (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, int) and -(10**9) < value < 10**9)
    ):
        return str(value)  # counts, ids, flags: too short to be a document or a phone
    # Redacted before quoting: the escaping would glue "\n" to the next word ("\\nsk-...").
    text = redact(str(value))
    if not text or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


class EventFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(fmt="%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        # The time, level and logger name are ours; only the message may carry outside text.
        return f"{record.asctime} {record.levelname} {record.name} {redact(record.message)}"

    def formatException(self, ei: Any) -> str:
        return redact(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return redact(super().formatStack(stack_info))

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_text:
            # Cached unredacted by another handler's formatter: ours redacts its own copy.
            record.exc_text = redact(record.exc_text)
        line = super().format(record)
        fields = []
        for key, value in record.__dict__.items():
            if key in _STANDARD_ATTRS or key in _SKIPPED_EXTRAS or key.startswith("_"):
                continue
            if _is_secret(key):
                value = REDACTED
            fields.append(f"{key}={_format_value(value)}")
        if fields:
            line = f"{line} {' '.join(fields)}"
        return line


class JsonEventFormatter(EventFormatter):
    """The same event as one JSON object per line: ``time``, ``level``, ``logger``, ``event``,
    the extras (redacted like the text lines; numbers, flags and None as JSON values) and
    ``exception`` with the redacted traceback."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        document: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "event": redact(record.message),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD_ATTRS or key in _SKIPPED_EXTRAS or key.startswith("_"):
                continue
            document[key] = REDACTED if _is_secret(key) else _json_value(value)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = redact(record.exc_text)
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        return json.dumps(document, ensure_ascii=False)


def _json_value(value: Any) -> Any:
    if (
        value is None
        or isinstance(value, bool)
        or (isinstance(value, int) and -(10**9) < value < 10**9)
    ):
        return value
    if isinstance(value, float):
        return value
    return redact(str(value))
