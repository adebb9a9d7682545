import logging

from config.logging import REDACTED, EventFormatter


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
