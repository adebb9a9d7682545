"""`conversations.handoff.session_handoff`, the one writer of a session's move to HUMAN: for each
reason, the session's fields, the SYSTEM event, the customer's text (the fixed text, the caller's
own, or none), the sends and the summary registered after commit, and a second handoff of a
session already in HUMAN writing nothing."""

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from pytest_django import DjangoCaptureOnCommitCallbacks

from agents.sources import RuntimeSettings
from agents.states import HandoffMotive, HandoffReason
from conversations.handoff import (
    FIXED_TEXT_REQUIRED,
    HandoffEffects,
    HandoffRequest,
    HandoffWritten,
    session_handoff,
)
from conversations.labels import event_text
from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

# A Wednesday, 12:00 in Brasília: open with OPEN_HOURS, closed with CLOSED_HOURS.
NOW = datetime(2026, 3, 11, 15, 0, tzinfo=UTC)
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
OPEN_HOURS = {day: [["08:00", "18:00"]] for day in DAYS}
CLOSED_HOURS: dict[str, list[list[str]]] = {day: [] for day in DAYS}
OPEN_TEXT = "Vou chamar alguém da equipe."
CLOSED_TEXT = "Estamos fora do horário; a equipe responde assim que voltar."
INVALID_FORMAT_TEXT = "Não entendi; vou chamar alguém da equipe."
# The rule, written out: which handoffs must send the fixed text. Literal values, not read from
# `FIXED_TEXT_REQUIRED`, so moving a reason across the line fails a test instead of moving its
# cases with it.
FAILURES = [
    "enrichment_limit",
    "llm_invalid_contract",
    "llm_invalid_json",
    "llm_provider_error",
    "llm_rate_limited",
    "llm_timeout",
    "media",
    "routing_loop",
    "strategic_company",
    "transcription_failed",
    "unknown_package",
]
SENDS_THE_FIXED_TEXT = ["model_requested", *FAILURES]
# Code 5 sends the model's closing message; a staff takeover sends nothing.
SENDS_NO_FIXED_TEXT = ["qualified_lead", "staff_takeover"]


def runtime(hours: dict[str, list[list[str]]] = OPEN_HOURS) -> RuntimeSettings:
    return RuntimeSettings(
        agent_name="Ana",
        company_name="Lab",
        business_hours=hours,
        handoff_message_open=OPEN_TEXT,
        handoff_message_closed=CLOSED_TEXT,
        invalid_format_message=INVALID_FORMAT_TEXT,
    )


class Recorder:
    """The send and summary functions: what was called, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def send(self, message_id: int) -> None:
        self.calls.append(("send", message_id))

    def summary(self, session_id: int) -> None:
        self.calls.append(("summary", session_id))


@pytest.fixture
def session(instance: Instance) -> Session:
    return recipes.session.make(instance=instance, state="QUALIFYING", segment="AMBIENTAL")


def effects(recorder: Recorder, settings: RuntimeSettings | None = None) -> HandoffEffects:
    return HandoffEffects(
        runtime=settings or runtime(), send=recorder.send, enqueue_summary=recorder.summary
    )


def handoff(
    session: Session,
    recorder: Recorder,
    capture: Any,
    *,
    settings: RuntimeSettings | None = None,
    **kwargs: Any,
) -> Any:
    """`session_handoff` in a transaction that commits; the hooks run at the commit."""
    kwargs.setdefault("now", NOW)
    calls = list(recorder.calls)
    with capture(execute=True) as callbacks, transaction.atomic():
        written = session_handoff(
            HandoffRequest(session_id=session.pk, **kwargs), effects=effects(recorder, settings)
        )
        # Nothing is sent or enqueued before the commit.
        assert recorder.calls == calls
    return written, [c.__qualname__ for c in callbacks]


def rows(session: Session) -> list[tuple[Any, ...]]:
    return list(
        Message.objects.filter(session=session)
        .order_by("id")
        .values_list(
            "direction", "message_type", "action", "agent", "content", "json_part", "raw_response"
        )
    )


def fields(session: Session) -> tuple[Any, ...]:
    session.refresh_from_db()
    return (session.state, session.handoff_reason, session.handoff_detail, session.handed_off_at)


def test_code_98_writes_human_the_event_and_the_fixed_text_then_sends_and_enqueues(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    recorder = Recorder()
    turn_id = uuid4()

    written, hooks = handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.MODEL_REQUESTED,
        detail="pedido_cliente",
        motive=HandoffMotive.PEDIDO_CLIENTE,
        fixed_text=True,
        agent="triagem",
        turn_id=turn_id,
    )

    assert fields(session) == ("HUMAN", "model_requested", "pedido_cliente", NOW)
    event, text = Message.objects.filter(session=session).order_by("id")
    assert written == HandoffWritten(session.pk, event_id=event.pk, part_ids=(text.pk,))
    assert rows(session) == [
        (
            "SYSTEM",
            "handoff",
            "model_requested",
            "triagem",
            "",
            {"reason": "model_requested", "detail": "pedido_cliente", "motive": "pedido_cliente"},
            "",
        ),
        ("OUTBOUND", "text", "model_requested", "", OPEN_TEXT, None, ""),
    ]
    # Rendered when shown: a customer asking for a person reads as such.
    assert event_text(event) == "Transferido para atendimento humano: cliente pediu um atendente."
    assert (text.delivery_status, text.part_index, text.turn_id, event.turn_id) == (
        DeliveryStatus.PENDING,
        0,
        turn_id,
        turn_id,
    )
    assert recorder.calls == [("send", text.pk), ("summary", session.pk)]
    assert hooks == [
        f"Recorder.send({text.pk})",
        f"Recorder.summary({session.pk})",
    ]


def test_every_reason_is_on_one_side_of_the_fixed_text_rule() -> None:
    assert sorted(FIXED_TEXT_REQUIRED) == sorted(SENDS_THE_FIXED_TEXT)
    assert sorted([*SENDS_THE_FIXED_TEXT, *SENDS_NO_FIXED_TEXT]) == sorted(HandoffReason)


@pytest.mark.parametrize("reason", [HandoffReason(r) for r in FAILURES])
def test_every_failure_sends_the_fixed_text_of_its_reason_in_business_hours(
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    reason: HandoffReason,
) -> None:
    recorder = Recorder()

    handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=reason,
        detail="x" * 300,
        fixed_text=True,
        raw_response="{bad",
    )

    expected = INVALID_FORMAT_TEXT if reason is HandoffReason.LLM_INVALID_JSON else OPEN_TEXT
    # The session keeps 255 characters of the detail; the event keeps it whole.
    assert fields(session) == ("HUMAN", reason.value, "x" * 255, NOW)
    event, text = Message.objects.filter(session=session).order_by("id")
    assert (event.direction, event.message_type, event.raw_response) == (
        "SYSTEM",
        "handoff",
        "{bad",
    )
    assert event.json_part == {"reason": reason.value, "detail": "x" * 300, "motive": ""}
    assert (text.direction, text.content, text.action) == ("OUTBOUND", expected, reason.value)
    assert recorder.calls == [("send", text.pk), ("summary", session.pk)]


@pytest.mark.parametrize("reason", [HandoffReason(r) for r in SENDS_THE_FIXED_TEXT])
def test_outside_business_hours_every_fixed_text_is_the_closed_one(
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    reason: HandoffReason,
) -> None:
    handoff(
        session,
        Recorder(),
        django_capture_on_commit_callbacks,
        reason=reason,
        fixed_text=True,
        settings=runtime(CLOSED_HOURS),
    )

    assert list(
        Message.objects.filter(session=session, direction=Direction.OUTBOUND).values_list(
            "content", flat=True
        )
    ) == [CLOSED_TEXT]


@pytest.mark.parametrize("reason", [HandoffReason(r) for r in SENDS_THE_FIXED_TEXT])
def test_the_model_s_words_are_never_sent_instead_of_the_fixed_text(
    session: Session, reason: HandoffReason
) -> None:
    recorder = Recorder()

    with pytest.raises(ValueError, match="sends the fixed text, never the model's"):
        session_handoff(
            HandoffRequest(session_id=session.pk, reason=reason, now=NOW, fixed_text=False),
            effects=effects(recorder),
        )

    assert fields(session) == ("QUALIFYING", "", "", None)
    assert rows(session) == []


def test_code_5_sends_the_caller_s_closing_message_after_the_event_and_no_fixed_text(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    recorder = Recorder()
    before = Message(
        session=session, direction=Direction.SYSTEM, message_type="lead_created", created_at=NOW
    )
    closing = [
        Message(session=session, direction=Direction.OUTBOUND, content=text, created_at=NOW)
        for text in ("Obrigada!", "Até logo.")
    ]

    written, _hooks = handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.QUALIFIED_LEAD,
        fixed_text=False,
        fields={"service": "ANALISE_AGUA", "state": "CONFIRM"},
        rows_before=[before],
        rows_after=closing,
    )

    session.refresh_from_db()
    # The turn's fields are written with the handoff's, which win over the turn's state.
    assert (session.state, session.service) == ("HUMAN", "ANALISE_AGUA")
    assert [(d, t, c) for d, t, _a, _g, c, _j, _r in rows(session)] == [
        ("SYSTEM", "lead_created", ""),
        ("SYSTEM", "handoff", ""),
        ("OUTBOUND", "text", "Obrigada!"),
        ("OUTBOUND", "text", "Até logo."),
    ]
    assert recorder.calls == [
        ("send", closing[0].pk),
        ("send", closing[1].pk),
        ("summary", session.pk),
    ]
    assert written.part_ids == (closing[0].pk, closing[1].pk)


def test_a_staff_takeover_in_the_business_app_sends_nothing_and_enqueues_no_summary(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        written = session_handoff(
            HandoffRequest(
                session_id=session.pk,
                reason=HandoffReason.STAFF_TAKEOVER,
                now=NOW,
                fixed_text=False,
            )
        )

    assert fields(session) == ("HUMAN", "staff_takeover", "", NOW)
    assert rows(session) == [("SYSTEM", "handoff", "staff_takeover", "", "", None, "")]
    assert event_text(Message.objects.get(session=session)) == (
        "Atendimento assumido pela equipe pelo app WhatsApp Business."
    )
    assert written is not None
    assert written.part_ids == ()
    assert callbacks == []


def test_a_staff_takeover_by_a_user_names_the_user_on_the_event(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    user = get_user_model().objects.create_user(username="marina", password="x")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        session_handoff(
            HandoffRequest(
                session_id=session.pk,
                reason=HandoffReason.STAFF_TAKEOVER,
                now=NOW,
                fixed_text=False,
                by_user=user,
            )
        )

    event = Message.objects.get(session=session)
    assert (event.content, event.staff_user_id, event.action) == ("", user.pk, "staff_takeover")
    assert event_text(event) == "Atendimento assumido por marina."
    assert callbacks == []


def test_a_handoff_that_sends_and_summarises_without_its_effects_raises_before_writing(
    session: Session,
) -> None:
    with pytest.raises(ValueError, match="llm_timeout handoff sends or enqueues the summary"):
        session_handoff(
            HandoffRequest(
                session_id=session.pk, reason=HandoffReason.LLM_TIMEOUT, now=NOW, fixed_text=True
            )
        )

    assert fields(session) == ("QUALIFYING", "", "", None)
    assert rows(session) == []


def test_a_second_handoff_of_a_human_session_writes_and_registers_nothing(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    recorder = Recorder()
    first, _hooks = handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.MODEL_REQUESTED,
        fixed_text=True,
    )
    written_rows = rows(session)

    second, hooks = handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.LLM_TIMEOUT,
        detail="again",
        fixed_text=True,
        now=datetime(2026, 3, 11, 16, 0, tzinfo=UTC),
    )

    assert first is not None
    assert second is None
    assert hooks == []
    assert fields(session) == ("HUMAN", "model_requested", "", NOW)
    assert rows(session) == written_rows
    assert recorder.calls == [("send", first.part_ids[0]), ("summary", session.pk)]


def test_the_handoff_keeps_the_state_it_left_and_a_second_handoff_does_not_overwrite_it(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    recorder = Recorder()
    handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.MODEL_REQUESTED,
        fixed_text=True,
    )
    handoff(
        session,
        recorder,
        django_capture_on_commit_callbacks,
        reason=HandoffReason.LLM_TIMEOUT,
        fixed_text=True,
    )

    session.refresh_from_db()
    assert (session.state, session.state_before_handoff) == ("HUMAN", "QUALIFYING")


def test_a_handoff_rolled_back_sends_and_enqueues_nothing(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    recorder = Recorder()

    def fails_after_the_handoff() -> None:
        with transaction.atomic():
            session_handoff(
                HandoffRequest(
                    session_id=session.pk,
                    reason=HandoffReason.ROUTING_LOOP,
                    now=NOW,
                    fixed_text=True,
                ),
                effects=effects(recorder),
            )
            raise RuntimeError("the caller's transaction fails")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError, match="the caller's transaction fails"),
    ):
        fails_after_the_handoff()

    assert (callbacks, recorder.calls) == ([], [])
    assert fields(session) == ("QUALIFYING", "", "", None)
    assert rows(session) == []


def test_no_other_module_moves_a_session_to_human() -> None:
    """The one-writer rule, kept: a new path calls `session_handoff` instead of writing HUMAN."""
    root = Path(__file__).resolve().parents[2] / "conversations"
    # A keyword or a dict key (an update, a create), not the in-memory copy a caller refreshes.
    writes = re.compile(
        r"(?<![.\w])state=SessionState\.HUMAN|[\"']state[\"']:\s*SessionState\.HUMAN"
    )
    writers = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "migrations" not in path.parts and writes.search(path.read_text())
    )
    assert writers == ["handoff.py"]
