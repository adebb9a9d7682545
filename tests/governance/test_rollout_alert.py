"""The e-mail to the prompt editors when a gradual release pauses itself
(governance.rollout_alert): who gets it, what it says, after the commit only, once, and a mail
server that refuses leaves the pause in place."""

import json
import logging
import threading

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection, transaction
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations.models import Instance
from governance.rollout_alert import agent_label, prompt_editor_addresses
from governance.rollout_pause import rollout_pauses_check
from prompts_admin.models import PromptOverride
from tests.governance.test_rollout_pause import release
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, staff_member

pytestmark = pytest.mark.django_db

SITE = "https://atendimento.example.com.br"
REASON = (
    "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
    "contra 10% (90 conversas), margem de 5 pontos"
)


@pytest.fixture(autouse=True)
def site(settings: Settings) -> None:
    settings.SITE_URL = SITE
    settings.DEFAULT_FROM_EMAIL = "atendimento@lab.example"


def editor(email: str, *groups: str, permissions: tuple[str, ...] = (), **fields: bool) -> User:
    user = staff_member(*groups, permissions=permissions)
    user.email = email
    for name, value in fields.items():
        setattr(user, name, value)
    user.save()
    return user


@pytest.fixture
def team() -> None:
    """Three who may change prompt overrides and e-mail; six who get nothing."""
    editor("editora@lab.example", PROMPT_EDITORS)
    editor("revisor@lab.example", permissions=("prompts_admin.change_promptoverride",))
    editor("chefe@lab.example", is_superuser=True)
    editor("suporte@lab.example", SUPPORT)  # may not change prompt overrides
    editor("leitora@lab.example", permissions=("prompts_admin.view_promptoverride",))
    editor("inativa@lab.example", PROMPT_EDITORS, is_active=False)
    editor("", PROMPT_EDITORS)  # no address
    editor("fora-do-admin@lab.example", PROMPT_EDITORS, is_staff=False)
    editor("chefe-inativo@lab.example", is_superuser=True, is_active=False)


def local(override: PromptOverride) -> str:
    assert override.rollout_paused_at is not None
    return timezone.localtime(override.rollout_paused_at).strftime("%d/%m/%Y %H:%M")


@pytest.mark.usefixtures("team")
def test_the_recipients_are_the_active_staff_who_may_change_prompt_overrides() -> None:
    assert prompt_editor_addresses() == [
        "chefe@lab.example",
        "editora@lab.example",
        "revisor@lab.example",
    ]


def test_two_spellings_of_one_address_are_e_mailed_once() -> None:
    editor("Editora@Lab.example", PROMPT_EDITORS)
    editor("editora@lab.example", PROMPT_EDITORS)
    editor("outra@lab.example", PROMPT_EDITORS)

    assert prompt_editor_addresses() == ["Editora@Lab.example", "outra@lab.example"]


@pytest.mark.usefixtures("team")
def test_a_pause_e_mails_each_editor_once_after_its_commit(
    instance: Instance,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with caplog.at_level(logging.INFO):
        with django_capture_on_commit_callbacks() as hooks:
            assert rollout_pauses_check() == [candidate.pk]
        assert mail.outbox == []  # not inside the pause's transaction
        assert [hook.__qualname__ for hook in hooks] == [
            f"rollout_pause_alert_send({candidate.pk})"
        ]
        for hook in hooks:
            hook()
        with django_capture_on_commit_callbacks(execute=True) as again:
            assert rollout_pauses_check() == []

    assert again == []
    assert [email.to for email in mail.outbox] == [
        ["chefe@lab.example"],
        ["editora@lab.example"],
        ["revisor@lab.example"],
    ]
    candidate.refresh_from_db()
    for email in mail.outbox:
        assert (email.from_email, email.subject) == (
            "atendimento@lab.example",
            f"Liberação aos poucos pausada: prompt do agente triagem "
            f"(prompt personalizado #{candidate.pk})",
        )
        assert email.body == (
            f"A liberação aos poucos do prompt personalizado #{candidate.pk} do agente triagem "
            "pausou sozinha: nenhuma conversa nova recebe esta versão até que ela seja retomada. "
            "As conversas que já a receberam continuam com ela.\n"
            "\n"
            f"Motivo: {REASON}\n"
            f"Pausada em: {local(candidate)}\n"
            "Porcentagem das novas conversas: 50%\n"
            "\n"
            "Para retomar, salve a página do prompt personalizado com a porcentagem; para "
            "encerrar a liberação, salve-a com a porcentagem vazia. Compare as duas versões em "
            "Métricas por versão do prompt.\n"
            "\n"
            f"Abrir: {SITE}/admin/prompts_admin/promptoverride/{candidate.pk}/change/\n"
        )
    [sent] = [r for r in caplog.records if r.getMessage() == "rollout_pause_email_sent"]
    assert (sent.override_id, sent.recipients, sent.sent) == (candidate.pk, 3, 3)  # type: ignore[attr-defined]
    for record in caplog.records:
        assert "@lab.example" not in json.dumps(record.__dict__, default=str)


@pytest.mark.usefixtures("team")
def test_no_e_mail_when_nothing_is_paused(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    release(instance, candidate_handoffs=11, current_handoffs=9)  # 10% vs 10%

    with django_capture_on_commit_callbacks(execute=True) as hooks:
        assert rollout_pauses_check() == []

    assert (hooks, mail.outbox) == ([], [])


@pytest.mark.usefixtures("team")
def test_a_pause_rolled_back_e_mails_no_one(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    def pause_then_fail() -> None:
        with transaction.atomic():
            rollout_pauses_check()
            raise RuntimeError("the caller's transaction fails after the pause")

    with django_capture_on_commit_callbacks(execute=True) as hooks, pytest.raises(RuntimeError):
        pause_then_fail()

    candidate.refresh_from_db()
    assert (hooks, mail.outbox, candidate.rollout_paused_at) == ([], [], None)


@pytest.mark.usefixtures("team")
def test_a_mail_server_that_refuses_is_logged_and_the_pause_stays(
    instance: Instance,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with django_capture_on_commit_callbacks(execute=True):
        assert rollout_pauses_check() == [candidate.pk]

    candidate.refresh_from_db()
    assert (candidate.rollout_pause_reason, candidate.rollout_percent) == (REASON, 50)
    assert candidate.rollout_paused_at is not None
    [failed] = [r for r in caplog.records if r.getMessage() == "rollout_pause_email_failed"]
    assert (failed.override_id, failed.recipients, failed.error) == (  # type: ignore[attr-defined]
        candidate.pk,
        3,
        "ConnectionRefusedError",
    )
    assert "@lab.example" not in json.dumps(failed.__dict__, default=str)


def test_without_editors_to_e_mail_the_pause_is_logged(
    instance: Instance,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    editor("", PROMPT_EDITORS)
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with django_capture_on_commit_callbacks(execute=True):
        assert rollout_pauses_check() == [candidate.pk]

    assert mail.outbox == []
    [skipped] = [r for r in caplog.records if r.getMessage() == "rollout_pause_email_skipped"]
    assert (skipped.override_id, skipped.recipients) == (candidate.pk, 0)  # type: ignore[attr-defined]


def test_without_site_url_the_e_mail_gives_the_admin_path(
    instance: Instance,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.SITE_URL = ""
    editor("editora@lab.example", PROMPT_EDITORS)
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with django_capture_on_commit_callbacks(execute=True):
        rollout_pauses_check()

    [email] = mail.outbox
    assert email.body.endswith(
        f"\nAbrir: /admin/prompts_admin/promptoverride/{candidate.pk}/change/\n"
    )


def test_a_release_resumed_before_the_hook_runs_e_mails_no_one(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    editor("editora@lab.example", PROMPT_EDITORS)
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with django_capture_on_commit_callbacks() as hooks:
        rollout_pauses_check()
    PromptOverride.objects.filter(pk=candidate.pk).update(rollout_paused_at=None)
    for hook in hooks:
        hook()

    assert mail.outbox == []


@pytest.mark.parametrize(
    ("agent", "label"),
    [("triagem", "triagem"), ("qualificacao", "qualificação"), ("coleta", "coleta"), ("x", "x")],
)
def test_the_e_mail_names_the_agent_by_its_pt_br_label(agent: str, label: str) -> None:
    assert agent_label(agent) == label


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_checks_at_once_pause_once_with_one_e_mail_and_one_version(
    instance: Instance,
) -> None:
    """Two beat runs overlapping, each in a thread with its own connection: the pause's row
    lock makes the second find the release paused already."""
    # The permission, not the group: a transactional test's flush drops the migrations' groups.
    editor("editora@lab.example", permissions=("prompts_admin.change_promptoverride",))
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)
    versions = candidate.history.count()
    barrier = threading.Barrier(2)
    paused: list[list[int]] = []

    def check() -> None:
        try:
            barrier.wait()
            paused.append(rollout_pauses_check())
        finally:
            connection.close()

    threads = [threading.Thread(target=check) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(paused) == [[], [candidate.pk]]
    assert [email.to for email in mail.outbox] == [["editora@lab.example"]]
    assert list(
        candidate.history.order_by("history_id").values_list("history_change_reason", flat=True)
    )[versions:] == [REASON]


@pytest.mark.parametrize(
    "stored",
    [
        "quebrada@lab.example\nBcc: intruso@fora.example",
        "quebrada@lab.example, outra@lab.example",
        "quebrada arroba lab.example",
    ],
)
@pytest.mark.usefixtures("team")
def test_an_editor_address_that_is_not_one_is_left_out_and_the_others_are_e_mailed(
    instance: Instance,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
    stored: str,
) -> None:
    """An address stored past the admin's validation (an import, a shell): not a header to
    inject, and not a failure that keeps the other editors from hearing of the pause."""
    broken = editor("x@lab.example", PROMPT_EDITORS)
    User.objects.filter(pk=broken.pk).update(email=stored)
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with caplog.at_level(logging.INFO), django_capture_on_commit_callbacks(execute=True):
        assert rollout_pauses_check() == [candidate.pk]

    assert [email.to for email in mail.outbox] == [
        ["chefe@lab.example"],
        ["editora@lab.example"],
        ["revisor@lab.example"],
    ]
    candidate.refresh_from_db()
    assert (candidate.rollout_pause_reason, candidate.rollout_percent) == (REASON, 50)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    for record in caplog.records:
        assert "@lab.example" not in json.dumps(record.__dict__, default=str)


@pytest.mark.usefixtures("team")
def test_a_message_the_mail_layer_refuses_is_logged_by_its_class_and_the_pause_stays(
    instance: Instance,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.DEFAULT_FROM_EMAIL = "atendimento@lab.example\nBcc: intruso@lab.example"
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    with django_capture_on_commit_callbacks(execute=True):
        assert rollout_pauses_check() == [candidate.pk]

    candidate.refresh_from_db()
    assert (candidate.rollout_pause_reason, candidate.rollout_percent, mail.outbox) == (
        REASON,
        50,
        [],
    )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "rollout_pause_email_failed"
    ]
    [failed] = [r for r in caplog.records if r.getMessage() == "rollout_pause_email_failed"]
    assert (failed.override_id, failed.recipients, failed.error) == (  # type: ignore[attr-defined]
        candidate.pk,
        3,
        "BadHeaderError",
    )
    for record in caplog.records:
        assert "@lab.example" not in json.dumps(record.__dict__, default=str)
