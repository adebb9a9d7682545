"""Each conversation keeps the release and the knowledge package versions its first turn pinned,
as it keeps its prompt versions: an edit or a deactivation of a package reaches the new
conversations, not the ones already going; a package with no readable pinned version is given as
it is now. Real turns on PostgreSQL: through the Celery task and the fake OpenAI server (the real
openai SDK), or the pipeline with the in-process model."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents.states import SessionState
from conversations.models import Instance, LLMCall, Session
from conversations.turns.tasks import process_session
from knowledge_base.models import KBPackage
from prompts_admin.models import Release, ReleaseStatus
from support.staff_actions import session_prompts_update
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import PACKAGE_TEXT, QUALIFYING, inbound, make_session, pipeline

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]

NEW_TEXT = "Use o frasco de 500 mL; encha até a marca."


def version_of(package_id: str) -> int:
    latest: int = (
        KBPackage.objects.get(package_id=package_id).history.latest("history_id").history_id
    )
    return latest


def edit(package_id: str, **fields: Any) -> int:
    """`package_id` saved with `fields` (as the admin saves it, with history); its new version."""
    package = KBPackage.objects.get(package_id=package_id)
    for name, value in fields.items():
        setattr(package, name, value)
    package.save()
    return version_of(package_id)


def pins(session: Session) -> tuple[int | None, dict[str, int]]:
    session.refresh_from_db()
    return session.release_id, dict(session.package_versions)


def given(request: dict[str, Any]) -> str:
    """Everything one model request carried (instructions and input items), as text."""
    return str(request["instructions"]) + json.dumps(request["input"], ensure_ascii=False)


def loaded_versions() -> list[list[tuple[str, int | None]]]:
    return [
        [(p["package_id"], p["version"]) for p in (call.context_snapshot or {})["loaded_packages"]]
        for call in LLMCall.objects.order_by("id")
    ]


def loading_the_package(instance: Instance, **fields: Any) -> Session:
    """A qualifying session that loaded COLETA_DE_AMOSTRAS."""
    return make_session(
        instance,
        SessionState.QUALIFYING,
        loaded_packages=["COLETA_DE_AMOSTRAS"],
        **QUALIFYING,
        **fields,
    )


def run_turn(session: Session, text: str, capture: Any) -> None:
    inbound(session, text)
    pipeline('{"s":1}Certo!').run(session, capture=capture)


# --- What the first turn pins ------------------------------------------------------------------


def test_the_first_turn_pins_the_published_release_and_every_active_packages_version(
    instance: Instance, capture: Any
) -> None:
    Release.objects.create(name="Março", status=ReleaseStatus.SUPERSEDED)
    published = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    Release.objects.create(name="Maio", status=ReleaseStatus.APPROVED)
    coleta, company = version_of("COLETA_DE_AMOSTRAS"), version_of("COMPANY_INFO")
    session = make_session(instance)

    run_turn(session, "Oi", capture)

    # PACOTE_ANTIGO is inactive: not pinned.
    assert pins(session) == (
        published.pk,
        {"COLETA_DE_AMOSTRAS": coleta, "COMPANY_INFO": company},
    )


def test_with_no_release_published_the_first_turn_pins_none_and_still_the_packages(
    instance: Instance, capture: Any
) -> None:
    Release.objects.create(name="Rascunho", status=ReleaseStatus.DRAFT)
    session = make_session(instance)

    run_turn(session, "Oi", capture)

    assert pins(session) == (
        None,
        {
            "COLETA_DE_AMOSTRAS": version_of("COLETA_DE_AMOSTRAS"),
            "COMPANY_INFO": version_of("COMPANY_INFO"),
        },
    )


def test_a_later_turn_pins_nothing_new(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    run_turn(session, "Oi", capture)
    first = pins(session)
    Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    edit("COMPANY_INFO", content="Desde 1991.")

    run_turn(session, "Tudo bem?", capture)

    assert pins(session) == first
    assert first[0] is None


def test_a_turn_of_a_session_with_a_human_pins_no_knowledge(
    instance: Instance, capture: Any
) -> None:
    Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    session = make_session(instance, SessionState.HUMAN)

    run_turn(session, "Oi", capture)

    assert pins(session) == (None, {})


# --- Through the Celery task and the fake OpenAI server ----------------------------------------


def task_turn(session: Session, text: str, model: FakeOpenAIServer, capture: Any) -> str:
    """One customer message answered by `conversations.process_session`; what the model was
    given."""
    inbound(session, text)
    model.queue_text('{"s":1}Certo!')
    with capture(execute=True):
        assert process_session.delay(session.pk).get() == "drained"
    return given(model.requests[-1])


def test_an_edited_package_reaches_new_conversations_not_the_pinned_one(
    instance: Instance, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI, capture: Any
) -> None:
    going = loading_the_package(instance)
    first = task_turn(going, "Como coleto?", openai_settings, capture)
    old = version_of("COLETA_DE_AMOSTRAS")
    new = edit("COLETA_DE_AMOSTRAS", content=NEW_TEXT)

    second = task_turn(going, "E depois?", openai_settings, capture)
    started_after: Session = recipes.session.make(
        instance=instance,
        customer_phone="5511977776666",
        state=SessionState.QUALIFYING.value,
        loaded_packages=["COLETA_DE_AMOSTRAS"],
        segment="AMBIENTAL",
        intent="ORCAMENTO",
    )
    fresh = task_turn(started_after, "Como coleto?", openai_settings, capture)

    assert (PACKAGE_TEXT in first, PACKAGE_TEXT in second, NEW_TEXT in second) == (
        True,
        True,
        False,
    )
    assert (NEW_TEXT in fresh, PACKAGE_TEXT in fresh) == (True, False)
    assert loaded_versions() == [
        [("COLETA_DE_AMOSTRAS", old)],
        [("COLETA_DE_AMOSTRAS", old)],
        [("COLETA_DE_AMOSTRAS", new)],
    ]
    assert pins(started_after)[1]["COLETA_DE_AMOSTRAS"] == new
    assert new != old


# --- Through the pipeline -----------------------------------------------------------------------


def test_a_package_deactivated_since_is_still_given_at_its_pinned_version(
    instance: Instance, capture: Any
) -> None:
    session = loading_the_package(instance)
    run_turn(session, "Oi", capture)
    pinned = version_of("COLETA_DE_AMOSTRAS")
    edit("COLETA_DE_AMOSTRAS", content=NEW_TEXT, is_active=False)

    inbound(session, "Como coleto?")
    run = pipeline('{"s":1}Certo!')
    run.run(session, capture=capture)

    [call] = run.llm.calls
    assert PACKAGE_TEXT in call["messages"][0].content
    assert NEW_TEXT not in call["messages"][0].content
    assert loaded_versions()[-1] == [("COLETA_DE_AMOSTRAS", pinned)]


def test_a_pinned_version_that_cannot_be_read_falls_back_to_the_live_package(
    instance: Instance, capture: Any
) -> None:
    live = edit("COLETA_DE_AMOSTRAS", content=NEW_TEXT)
    session = loading_the_package(
        instance,
        prompt_versions={"triagem": "builtin", "qualificacao": "builtin", "coleta": "builtin"},
        package_versions={"COLETA_DE_AMOSTRAS": 987654},
    )

    inbound(session, "Como coleto?")
    run = pipeline('{"s":1}Certo!')
    run.run(session, capture=capture)

    [call] = run.llm.calls
    assert NEW_TEXT in call["messages"][0].content
    assert loaded_versions() == [[("COLETA_DE_AMOSTRAS", live)]]
    # The session keeps its pin: a staff action moves it, not a turn.
    assert pins(session) == (None, {"COLETA_DE_AMOSTRAS": 987654})


def test_a_package_created_after_the_first_turn_is_given_as_it_is(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, SessionState.QUALIFYING, **QUALIFYING)
    run_turn(session, "Oi", capture)
    KBPackage.objects.create(
        package_id="PRAZOS", title="Prazos", description="Prazos", content="Cinco dias úteis."
    )
    Session.objects.filter(pk=session.pk).update(loaded_packages=["PRAZOS"])

    inbound(session, "Qual o prazo?")
    run = pipeline('{"s":1}Certo!')
    run.run(session, capture=capture)

    assert "Cinco dias úteis." in run.llm.calls[0]["messages"][0].content
    assert "PRAZOS" not in pins(session)[1]


def test_after_use_the_current_prompts_the_next_turn_gives_the_current_knowledge(
    instance: Instance, capture: Any
) -> None:
    session = loading_the_package(instance)
    run_turn(session, "Oi", capture)
    new = edit("COLETA_DE_AMOSTRAS", content=NEW_TEXT)
    release = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    staff = User.objects.create(username="ana", is_staff=True)

    session_prompts_update(session_id=session.pk, user=staff, now=NOW)
    inbound(session, "Como coleto?")
    run = pipeline('{"s":1}Certo!')
    run.run(session, capture=capture)

    assert NEW_TEXT in run.llm.calls[0]["messages"][0].content
    assert pins(session) == (
        release.pk,
        {"COLETA_DE_AMOSTRAS": new, "COMPANY_INFO": version_of("COMPANY_INFO")},
    )
