"""The activation gate and the prompt test cases: activating a text also asks the agent's active
cases to pass against it (the latest run of exactly that text, covering each case as it is now),
or a confirmation with a reason, which the override's history records. The runs are real: the
editor starts them from the admin, the fake OpenAI server answers through the real SDK."""

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from conversations.models import Instance
from governance.models import PromptTestCase, PromptTestRun, ReplayRun, ReplayStatus
from governance.replay import ReplayDeps
from governance.test_cases import prompt_test_case_create
from prompts_admin.models import PromptOverride, prompt_content_hash
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import DRAFT_TEXT, GREETING, conversation, draft, record_turn
from tests.helpers.staff import PROMPT_EDITORS, logged_in, staff_member

pytestmark = pytest.mark.django_db

HANDOFF_ANSWER = '{"s":98,"motivo":"pedido_cliente"}Vou chamar alguém da equipe.'
REASON = "Caso antigo, a regra mudou"


@pytest.fixture
def editor() -> Client:
    return logged_in(staff_member(PROMPT_EDITORS))


@pytest.fixture
def case(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> PromptTestCase:
    """The triage agent's one active case: a customer who asks for a person, handed off."""
    call = record_turn(
        conversation(instance),
        "Quero falar com uma pessoa",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    model.reset()
    return prompt_test_case_create(
        call=call,
        user=staff_member(PROMPT_EDITORS),
        title="Pede uma pessoa",
        expectations={"expected_code": 98},
        deps=ReplayDeps.from_settings(),
    )


@pytest.fixture
def override() -> PromptOverride:
    """A draft with a clean replay of its text: the replay alone would let it through."""
    text = draft()
    baker.make(
        ReplayRun,
        agent="triagem",
        content=DRAFT_TEXT,
        content_hash=prompt_content_hash(DRAFT_TEXT),
        status=ReplayStatus.DONE,
        calls_selected=10,
        calls_done=10,
        cost_usd=Decimal("0.001000"),
    )
    return text


def run_cases(editor: Client, override: PromptOverride, capture: Any) -> PromptTestRun:
    url = f"/admin/governance/prompttestrun/run/?override={override.pk}"
    assert editor.get(url).status_code == 200
    with capture(execute=True):
        response = editor.post(url)
    assert (response.status_code, response["Location"]) == (
        302,
        f"/admin/governance/prompttestrun/?override__id__exact={override.pk}",
    )
    run: PromptTestRun = PromptTestRun.objects.latest("id")
    return run


def activate(editor: Client, override: PromptOverride, **fields: str) -> Any:
    data = {"agent": "triagem", "content": DRAFT_TEXT, "note": "", "is_active": "on"} | fields
    return editor.post(f"/admin/prompts_admin/promptoverride/{override.pk}/change/", data)


def reasons(override: PromptOverride) -> list[str | None]:
    return list(
        PromptOverride.history.filter(id=override.pk)
        .order_by("history_date", "history_id")
        .values_list("history_change_reason", flat=True)
    )


def refusal(response: Any) -> list[str]:
    assert response.status_code == 200
    errors: list[str] = response.context["adminform"].form.errors["confirm_activation"]
    return errors


def test_without_a_run_of_the_text_the_activation_is_refused_saying_so(
    case: PromptTestCase, override: PromptOverride, editor: Client
) -> None:
    response = activate(editor, override)

    assert refusal(response) == [
        "Os casos de teste do agente não passam com este texto: nenhuma execução deste texto "
        "cobre os casos ativos do agente (1). Rode-os com este texto (“Rodar os casos de "
        "teste”), ou marque “Ativar mesmo assim”, escreva o motivo da alteração e salve de novo."
    ]
    override.refresh_from_db()
    assert (override.is_active, reasons(override)) == (False, [None])


def test_a_failing_run_is_refused_with_its_failures_and_a_confirmation_records_the_reason(
    case: PromptTestCase,
    override: PromptOverride,
    editor: Client,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    model.queue_text(GREETING)
    run = run_cases(editor, override, django_capture_on_commit_callbacks)

    refused = activate(editor, override)
    unreasoned = activate(editor, override, confirm_activation="on")
    confirmed = activate(editor, override, confirm_activation="on", change_reason=REASON)

    assert (run.cases, run.passed, run.failed) == (1, 0, 1)
    assert refusal(refused) == [
        "Os casos de teste do agente não passam com este texto: 1 de 1 falharam na execução "
        f"#{run.pk} (#{case.pk} Pede uma pessoa: código esperado 98, obtido 1). Rode-os com "
        "este texto (“Rodar os casos de teste”), ou marque “Ativar mesmo assim”, escreva o "
        "motivo da alteração e salve de novo."
    ]
    assert unreasoned.context["adminform"].form.errors == {
        "change_reason": [
            "Escreva no motivo da alteração por que ativa este texto mesmo assim: ele fica no histórico."
        ]
    }
    assert confirmed.status_code == 302
    override.refresh_from_db()
    assert override.is_active is True
    replay = ReplayRun.objects.get()
    assert reasons(override)[-1] == (
        f"Ativado com o teste #{replay.pk} e com casos de teste falhando (1 de 1 falharam "
        f"na execução #{run.pk}): {REASON}"
    )


def test_a_passing_run_lets_the_activation_through_with_the_replay_alone(
    case: PromptTestCase,
    override: PromptOverride,
    editor: Client,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    model.queue_text(HANDOFF_ANSWER)
    run = run_cases(editor, override, django_capture_on_commit_callbacks)

    response = activate(editor, override)

    assert (run.passed, run.failed, response.status_code) == (1, 0, 302)
    replay = ReplayRun.objects.get()
    assert reasons(override)[-1] == f"Ativado com o teste #{replay.pk}"


def test_a_case_edited_after_the_run_is_not_covered_by_it(
    case: PromptTestCase,
    override: PromptOverride,
    editor: Client,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    model.queue_text(HANDOFF_ANSWER)
    run_cases(editor, override, django_capture_on_commit_callbacks)
    case.must_contain = ["equipe"]
    case.save()

    response = activate(editor, override)

    assert refusal(response) == [
        "Os casos de teste do agente não passam com este texto: nenhuma execução deste texto "
        "cobre os casos ativos do agente (1). Rode-os com este texto (“Rodar os casos de "
        "teste”), ou marque “Ativar mesmo assim”, escreva o motivo da alteração e salve de novo."
    ]


def test_an_inactive_case_asks_nothing_and_the_replay_alone_decides(
    case: PromptTestCase, override: PromptOverride, editor: Client
) -> None:
    case.is_active = False
    case.save()

    response = activate(editor, override)

    assert response.status_code == 302
    replay = ReplayRun.objects.get()
    assert reasons(override)[-1] == f"Ativado com o teste #{replay.pk}"


def test_no_replay_and_failing_cases_ask_for_both_in_one_message_and_one_reason(
    case: PromptTestCase,
    editor: Client,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    override = draft()
    model.queue_text(GREETING)
    run = run_cases(editor, override, django_capture_on_commit_callbacks)

    refused = activate(editor, override)
    confirmed = activate(editor, override, confirm_activation="on", change_reason=REASON)

    assert refusal(refused) == [
        "Nenhum teste deste texto em conversas gravadas: ativá-lo coloca diante dos clientes "
        "um prompt que ninguém testou. Teste-o antes, ou marque “Ativar mesmo assim”, escreva "
        "o motivo da alteração e salve de novo. Além disso, os casos de teste do agente não passam com este texto: 1 "
        f"de 1 falharam na execução #{run.pk} (#{case.pk} Pede uma pessoa: código esperado 98, "
        "obtido 1)."
    ]
    assert confirmed.status_code == 302
    assert reasons(override)[-1] == (
        "Ativado sem teste em conversas gravadas e com casos de teste falhando (1 de 1 "
        "falharam na execução "
        f"#{run.pk}): {REASON}"
    )


def test_support_may_not_run_the_cases(override: PromptOverride, support_client: Client) -> None:
    url = f"/admin/governance/prompttestrun/run/?override={override.pk}"

    assert (support_client.get(url).status_code, support_client.post(url).status_code) == (
        403,
        403,
    )
    assert PromptTestRun.objects.count() == 0


def test_the_form_shows_the_cases_evidence_under_active_and_after_the_activation(
    case: PromptTestCase,
    override: PromptOverride,
    editor: Client,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    page = f"/admin/prompts_admin/promptoverride/{override.pk}/change/"
    before = editor.get(page).context["adminform"].form.fields["is_active"].help_text
    model.queue_text(HANDOFF_ANSWER)
    run = run_cases(editor, override, django_capture_on_commit_callbacks)

    after = editor.get(page).context["adminform"].form.fields["is_active"].help_text
    activated = activate(editor, override)

    assert before.endswith(
        "<br>Casos de teste ativos deste agente: 1; nenhuma execução deste texto os cobre."
    )
    assert after.endswith(
        f"<br>Casos de teste deste agente: execução #{run.pk} deste texto, 0 de 1 falharam. "
        f'<a href="/admin/governance/prompttestrun/{run.pk}/change/">Ver a execução</a>'
    )
    replay = ReplayRun.objects.get()
    assert [str(m) for m in activated.wsgi_request._messages][:2] == [
        f"Último teste deste texto em conversas gravadas (#{replay.pk}): 10 chamadas, 0 códigos mudaram, 0 "
        "transferências mudaram, 0 erros de contrato, custo US$ 0,0010. "
        f'<a href="/admin/governance/replayrun/{replay.pk}/change/">Ver o teste</a>',
        f"Casos de teste deste agente: execução #{run.pk} deste texto, 0 de 1 falharam. "
        f'<a href="/admin/governance/prompttestrun/{run.pk}/change/">Ver a execução</a>',
    ]


def test_the_cases_evidence_is_read_once_per_request(
    case: PromptTestCase, override: PromptOverride, editor: Client
) -> None:
    with CaptureQueriesContext(connection) as refused:
        activate(editor, override)

    runs = sum('FROM "governance_prompttestrun"' in q["sql"] for q in refused.captured_queries)
    assert runs == 1
