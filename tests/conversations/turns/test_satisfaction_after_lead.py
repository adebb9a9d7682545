"""The satisfaction question after a confirmed lead (code 5), when RuntimeConfig asks for it: sent
after the model's closing message, in the same commit, once per conversation."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from conversations.models import Instance, SatisfactionSurvey, Session
from prompts_admin.models import RuntimeConfig
from support.staff_actions import session_close
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import confirming, inbound, outbound, pipeline
from tests.helpers.staff import SUPPORT, staff_member

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]
CLOSING = "Perfeito, Ana! Sua solicitação foi registrada."


def lead_confirmed(instance: Instance, capture: Any) -> tuple[Session, list[int]]:
    session = confirming(instance)
    Session.objects.filter(pk=session.pk).update(last_inbound_at=NOW - timedelta(minutes=2))
    inbound(session, "Sim, está tudo certo")
    run = pipeline('{"s":5}' + CLOSING)
    run.run(session, capture=capture)
    return session, run.sent


def test_after_a_confirmed_lead_the_question_follows_the_models_message(
    instance: Instance, capture: Any
) -> None:
    config = RuntimeConfig.load()
    config.satisfaction_after_lead = True
    config.satisfaction_style = "list"
    config.save()

    session, sent = lead_confirmed(instance, capture)

    closing, question = outbound(session)
    assert (closing.content, question.content, question.action) == (
        CLOSING,
        "Como você avalia o atendimento?",
        "satisfaction_survey",
    )
    assert question.interactive is not None
    assert question.interactive["type"] == "list"
    assert sent == [closing.pk, question.pk]
    survey = SatisfactionSurvey.objects.get()
    assert (
        survey.session_id,
        survey.trigger,
        survey.style,
        survey.closed_by,
        survey.handoff_reason,
        survey.asked_at,
    ) == (session.pk, "lead_confirmed", "list", None, "qualified_lead", question.created_at)


def test_by_default_a_confirmed_lead_asks_nothing(instance: Instance, capture: Any) -> None:
    session, sent = lead_confirmed(instance, capture)

    [closing] = outbound(session)
    assert sent == [closing.pk]
    assert SatisfactionSurvey.objects.count() == 0


def test_the_close_after_a_lead_that_was_asked_asks_nothing_again(
    instance: Instance, capture: Any
) -> None:
    config = RuntimeConfig.load()
    config.satisfaction_after_lead = True
    config.satisfaction_after_close = True
    config.save()
    session, _sent = lead_confirmed(instance, capture)
    ana: User = staff_member(SUPPORT)
    again: list[int] = []

    with capture(execute=True):
        outcome = session_close(
            session_id=session.pk, user=ana, now=NOW + timedelta(minutes=5), send=again.append
        )

    assert (outcome.message, again) == ("Conversa encerrada.", [])
    assert SatisfactionSurvey.objects.get().trigger == "lead_confirmed"
