"""Prompt test cases: a recorded call (a real turn, the fake OpenAI server through the real SDK)
frozen with an editor's expectations, run against drafts through the replay's path; nothing
sent, nothing changed."""

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from pytest_django import Settings

from conversations.models import Instance, LLMCall
from conversations.privacy.customer_data import customer_data_export, customer_selector
from conversations.privacy.retention import session_anonymise
from governance.models import HandoffExpectation, PromptTestCase, PromptTestRun
from governance.replay import ReplayDeps
from governance.test_cases import CasesReport, prompt_test_case_create, run_cases
from prompts_admin.models import prompt_content_hash
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import (
    DRAFT_TEXT,
    GREETING,
    conversation,
    database_state,
    draft,
    record_turn,
)
from tests.helpers.staff import PROMPT_EDITORS, staff_member

pytestmark = pytest.mark.django_db

HANDOFF_ANSWER = '{"s":98,"motivo":"pedido_cliente"}Vou chamar alguém da equipe.'


def recorded_greeting(instance: Instance, model: FakeOpenAIServer, capture: Any) -> LLMCall:
    session = conversation(instance, customer_name="Maria Souza", customer_phone="5511987654321")
    call = record_turn(
        session,
        "Oi, aqui é a Maria Souza, meu celular é 11 98765-4321",
        GREETING,
        model=model,
        capture=capture,
    )
    model.reset()
    return call


def case_of(call: LLMCall, user: Any = None, **expectations: Any) -> PromptTestCase:
    return prompt_test_case_create(
        call=call,
        user=user if user is not None else staff_member(permissions=_ALL_DATA),
        title="Cliente pede atendente",
        expectations=expectations,
        deps=ReplayDeps.from_settings(),
    )


_ALL_DATA = ("conversations.view_personal_data",)


def run(cases: list[PromptTestCase], content: str = DRAFT_TEXT) -> CasesReport:
    return run_cases(cases, draft(content=content), ReplayDeps.from_settings())


def test_a_case_expecting_code_98_fails_on_a_greeting_and_passes_on_a_handoff(
    instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, expected_code=98, handoff_expected=HandoffExpectation.YES)
    sent_before = len(fake_graph.requests)
    before = database_state()
    model.queue_text(GREETING, input_tokens=1000, output_tokens=100)
    model.queue_text(HANDOFF_ANSWER, input_tokens=1000, output_tokens=100)

    greeting, handoff = run([case]), run([case])

    assert greeting.as_json() == {
        "cases": 1,
        "passed": 0,
        "failed": 1,
        # gpt-4o-mini: 1000 × 0.15 + 100 × 0.60 per million tokens.
        "cost_usd": "0.000210",
        "results": [
            {
                "case": case.pk,
                "title": "Cliente pede atendente",
                "passed": False,
                "code": 1,
                "differences": [
                    "código esperado 98, obtido 1",
                    "esperava uma transferência, não houve nenhuma",
                ],
            }
        ],
    }
    assert (handoff.passed, handoff.failed, handoff.results[0].differences) == (1, 0, ())
    assert handoff.results[0].text == "Vou chamar alguém da equipe."
    # The draft's text reached the model, with the recorded conversation.
    sent = model.requests[-1]
    assert DRAFT_TEXT in sent["instructions"]
    assert [m["content"] for m in sent["input"][:-1]] == [
        "Oi, aqui é a Maria Souza, meu celular é 11 98765-4321"
    ]
    # Nothing sent, nothing changed, nothing recorded.
    assert len(fake_graph.requests) == sent_before
    assert database_state() == before


def test_the_case_keeps_the_recorded_answer_and_the_call_read_now(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)

    case = case_of(call)

    assert (
        case.agent,
        case.llm_call_id,
        case.source_instance_id,
        case.session_id_recorded,
        case.recorded_at,
        case.recorded_code,
        case.recorded_text,
        case.masked,
        case.context_snapshot["customer_name"],
        case.history_entries,
    ) == (
        "triagem",
        call.pk,
        instance.pk,
        call.session_id,
        call.created_at,
        1,
        "Olá! Como posso ajudar?",
        False,
        "Maria Souza",
        [
            {
                "direction": "INBOUND",
                "content": "Oi, aqui é a Maria Souza, meu celular é 11 98765-4321",
                "error": "",
                "staff": False,
                "quoted": "",
            }
        ],
    )


def test_an_editor_without_personal_data_saves_a_masked_case_that_still_runs(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    editor = staff_member(PROMPT_EDITORS)

    case = case_of(call, editor, must_contain=["ajudar"])
    model.queue_text(GREETING)
    report = run([case])

    assert (
        case.masked,
        case.created_by_id,
        case.context_snapshot["customer_name"],
        case.context_snapshot["customer_phone"],
        [entry["content"] for entry in case.history_entries],
    ) == (
        True,
        editor.pk,
        "M*** S***",
        "*************",
        ["Oi, aqui é a M*** S***, meu celular é ** *****-****"],
    )
    # The model reads the masked copy: the customer's data is nowhere in the case.
    assert [m["content"] for m in model.requests[-1]["input"][:-1]] == [
        "Oi, aqui é a M*** S***, meu celular é ** *****-****"
    ]
    assert (report.passed, report.failed) == (1, 0)


@pytest.mark.parametrize(
    ("must", "must_not", "differences"),
    [
        (["equipe"], [], []),
        (["EQUIPE"], [], []),
        (["orçamento"], [], ["a resposta não contém “orçamento”"]),
        ([], ["Olá"], []),
        ([], ["chamar alguém"], ["a resposta contém “chamar alguém”"]),
        (
            ["equipe", "sábado"],
            ["vou", "nunca"],
            ["a resposta não contém “sábado”", "a resposta contém “vou”"],
        ),
    ],
    ids=["present", "any-case", "absent", "absent-forbidden", "forbidden", "both-lists"],
)
def test_texts_that_must_and_must_not_appear_in_the_reply(
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
    must: list[str],
    must_not: list[str],
    differences: list[str],
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, must_contain=must, must_not_contain=must_not)
    model.queue_text(HANDOFF_ANSWER)

    [result] = run([case]).results

    assert (result.passed, list(result.differences)) == (not differences, differences)


def test_required_fields_state_reason_and_package_are_compared(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(
        call,
        required_fields=["motivo", "dados.email"],
        expected_state="QUALIFYING",
        handoff_expected=HandoffExpectation.NO,
        expected_handoff_reason="qualified_lead",
        expected_package="ANALISE_AGUA",
    )
    model.queue_text(HANDOFF_ANSWER)

    [result] = run([case]).results

    assert list(result.differences) == [
        "próximo estado esperado Qualificação, obtido —",
        "esperava nenhuma transferência, houve uma (transferida pela assistente)",
        "motivo de transferência esperado lead qualificado, obtido transferida pela assistente",
        "falta o campo dados.email na resposta",
        "pacote esperado ANALISE_AGUA, pedidos: —",
    ]


def test_a_provider_error_fails_the_case_and_the_next_one_runs(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    first, second = case_of(call, expected_code=1), case_of(call, expected_code=1)
    model.queue_error(400)
    model.queue_text(GREETING)

    report = run([first, second])

    assert [(r.case_id, r.passed, r.differences) for r in report.results] == [
        (
            first.pk,
            False,
            ("o modelo não respondeu: HTTP 400: Error code: 400 - Invalid value for 'input'.",),
        ),
        (second.pk, True, ()),
    ]


@pytest.mark.parametrize(
    ("cap", "third"),
    [
        (0.00042, (False, ("não rodou: a execução atingiu REPLAY_MAX_COST_USD",))),
        (0.000421, (True, ())),
    ],
    ids=["at-the-cap-stops", "just-below-runs"],
)
def test_the_cost_cap_leaves_the_cases_after_it_unrun(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Settings,
    django_capture_on_commit_callbacks: Any,
    cap: float,
    third: tuple[bool, tuple[str, ...]],
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    cases = [case_of(call, expected_code=1) for _ in range(3)]
    # One call of 1000 + 100 tokens costs US$ 0.000210 at gpt-4o-mini's prices: two, 0.000420.
    settings.REPLAY_MAX_COST_USD = cap
    for _ in range(3):
        model.queue_text(GREETING, input_tokens=1000, output_tokens=100)

    report = run(cases)

    assert [(r.passed, r.differences) for r in report.results] == [(True, ()), (True, ()), third]


def test_a_case_outlives_its_conversation(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, expected_code=1)
    call.session.delete()
    model.queue_text(GREETING)

    case.refresh_from_db()
    report = run([case])

    assert (case.llm_call_id, report.passed) == (None, 1)
    assert [m["content"] for m in model.requests[-1]["input"][:-1]] == [
        "Oi, aqui é a Maria Souza, meu celular é 11 98765-4321"
    ]


def command(*args: str) -> tuple[dict[str, Any], int]:
    out = StringIO()
    code = 0
    try:
        call_command("prompt_tests", *args, "--json", stdout=out)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return json.loads(out.getvalue()), code


def test_the_command_prints_the_runs_json_stores_it_and_exits_1_on_a_failure(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    handoff = case_of(call, expected_code=98)
    greeting = case_of(call, expected_code=1, must_contain=["ajudar"])
    override = draft()
    model.queue_text(HANDOFF_ANSWER, input_tokens=1000, output_tokens=100)
    model.queue_text(HANDOFF_ANSWER, input_tokens=1000, output_tokens=100)

    data, code = command("--override", str(override.pk))

    run = PromptTestRun.objects.get()
    assert (data, code) == (
        {
            "agent": "triagem",
            "override": override.pk,
            "run_id": run.pk,
            "cases": 2,
            "passed": 1,
            "failed": 1,
            "cost_usd": "0.000420",
            "results": [
                {
                    "case": handoff.pk,
                    "title": "Cliente pede atendente",
                    "passed": True,
                    "code": 98,
                    "differences": [],
                },
                {
                    "case": greeting.pk,
                    "title": "Cliente pede atendente",
                    "passed": False,
                    "code": 98,
                    "differences": [
                        "código esperado 1, obtido 98",
                        "a resposta não contém “ajudar”",
                    ],
                },
            ],
        },
        1,
    )
    assert (run.agent, run.content_hash, run.cases, run.passed, run.failed) == (
        "triagem",
        prompt_content_hash(DRAFT_TEXT),
        2,
        1,
        1,
    )


def test_the_command_refuses_an_unknown_override() -> None:
    with pytest.raises(CommandError, match=r"^no prompt override with id 999$"):
        call_command("prompt_tests", "--override", "999")


def test_the_commands_summary_names_each_case_and_its_differences(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, expected_code=98)
    override = draft()
    model.queue_text(GREETING, input_tokens=1000, output_tokens=100)
    out = StringIO()

    with pytest.raises(SystemExit) as exit_:
        call_command("prompt_tests", "--override", str(override.pk), stdout=out)

    assert exit_.value.code == 1
    assert out.getvalue().splitlines() == [
        f"FAIL #{case.pk} Cliente pede atendente",
        "       código esperado 98, obtido 1",
        "cases: 1, passed: 0, failed: 1, cost_usd: 0.000210",
    ]


def test_the_command_against_the_agents_current_prompt_exits_0_and_stores_nothing(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, expected_code=1)
    inactive = case_of(call, expected_code=98)
    inactive.is_active = False
    inactive.save()
    model.queue_text(GREETING)

    data, code = command("--agent", "triagem")

    assert (data["cases"], data["passed"], data["run_id"], data["override"], code) == (
        1,
        1,
        None,
        None,
        0,
    )
    assert data["results"][0]["case"] == case.pk
    assert PromptTestRun.objects.count() == 0
    assert DRAFT_TEXT not in model.requests[-1]["instructions"]


def copies(case: PromptTestCase, count: int) -> list[PromptTestCase]:
    """`count` cases like `case` (each saved, with its version)."""
    made = []
    for _ in range(count):
        case.pk = None
        case.save()
        made.append(PromptTestCase.objects.select_related("source_instance").get(pk=case.pk))
    return made


@pytest.mark.parametrize("count", [1, 50])
def test_a_run_reads_the_database_a_fixed_number_of_times_whatever_its_cases(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Settings,
    django_capture_on_commit_callbacks: Any,
    django_assert_num_queries: Any,
    count: int,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    cases = copies(case_of(call, expected_code=1), count)
    override = draft()
    settings.REPLAY_CONCURRENCY = 4
    for _ in range(count):
        model.queue_text(GREETING)
    deps = ReplayDeps.from_settings()

    # Once per run, whatever its cases: the catalog (segments, intents, services, packages)
    # and the prompt's runtime configuration and strategic companies.
    with django_assert_num_queries(6):
        report = run_cases(cases, override, deps)

    assert (len(report.results), report.passed, len(model.requests)) == (count, count, count)


def test_anonymising_the_conversation_masks_its_cases_and_their_versions_and_export_lists_them(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    case = case_of(call, expected_code=1)
    case.title = "Saudação"
    case.save()
    session = call.session

    exported = customer_data_export(customer_selector(phone=session.customer_phone))
    anonymised = session_anonymise(session.pk, now=timezone.now())

    [session_export] = exported["sessions"]
    assert [(c["case"], c["recorded_text"]) for c in session_export["prompt_test_cases"]] == [
        (case.pk, "Olá! Como posso ajudar?")
    ]
    case.refresh_from_db()
    contents = [
        (
            version.masked,
            version.context_snapshot["customer_name"],
            version.history_entries[0]["content"],
        )
        for version in PromptTestCase.history.filter(id=case.pk).order_by("history_id")
    ]
    assert (anonymised, case.masked, case.context_snapshot["customer_phone"]) == (
        True,
        True,
        "*************",
    )
    assert contents == [
        (True, "M*** S***", "Oi, aqui é a M*** S***, meu celular é ** *****-****"),
        (True, "M*** S***", "Oi, aqui é a M*** S***, meu celular é ** *****-****"),
    ]
