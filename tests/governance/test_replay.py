"""The replay of a draft prompt over recorded calls: recorded by real turns, replayed through the
real OpenAI SDK against the fake server; nothing sent, nothing changed."""

import json
from decimal import Decimal
from typing import Any

import pytest

from conversations.models import Instance, LLMCall
from governance.models import ContractOutcome, ReplayResult, ReplayRun, ReplayStatus
from governance.replay import ReplayFilters, ReplayRefused, replay_run_execute, replay_run_start
from knowledge_base.models import KBPackage
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

pytestmark = pytest.mark.django_db

HANDOFF_ANSWER = '{"s":98,"motivo":"pedido_cliente"}Vou chamar alguém da equipe.'


def three_greetings(instance: Instance, model: FakeOpenAIServer, capture: Any) -> list[LLMCall]:
    texts = ["Oi, bom dia", "Quero um orçamento", "Vocês atendem sábado?"]
    return [
        record_turn(conversation(instance), text, GREETING, model=model, capture=capture)
        for text in texts
    ]


def replay(**filters: Any) -> ReplayRun:
    run = replay_run_start(override=draft(), filters=ReplayFilters(**filters), user=None)
    return replay_run_execute(run_id=run.pk)


def test_a_draft_that_turns_one_answer_into_a_handoff_changes_one_code_and_one_handoff(
    instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: Any,
) -> None:
    calls = three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    sent_before = len(fake_graph.requests)
    assert sent_before == 6  # the recorded turns' replies and read receipts
    before = database_state()
    model.queue_text(GREETING, input_tokens=1000, output_tokens=100)
    model.queue_text(HANDOFF_ANSWER, input_tokens=1000, output_tokens=100)
    model.queue_text(GREETING, input_tokens=1000, output_tokens=100)

    run = replay()

    assert (
        run.status,
        run.calls_selected,
        run.calls_done,
        run.code_changed,
        run.state_changed,
        run.handoff_changed,
        run.contract_errors,
        run.repaired,
        run.provider_errors,
        run.tokens_input,
        run.tokens_output,
        run.cost_usd,
        run.content,
        run.content_hash,
        run.model,
    ) == (
        ReplayStatus.DONE,
        3,
        3,
        1,
        0,
        1,
        0,
        0,
        0,
        3000,
        300,
        # gpt-4o-mini: 3000 × 0.15 + 300 × 0.60 per million tokens.
        Decimal("0.000630"),
        DRAFT_TEXT,
        prompt_content_hash(DRAFT_TEXT),
        "gpt-4o-mini",
    )
    rows = list(
        ReplayResult.objects.filter(run=run)
        .order_by("recorded_at")
        .values_list(
            "llm_call_id",
            "recorded_code",
            "replayed_code",
            "recorded_handoff",
            "replayed_handoff",
            "code_changed",
            "handoff_changed",
            "contract",
            "recorded_text",
            "replayed_text",
        )
    )
    assert rows == [
        (calls[0].pk, 1, 1, "", "", False, False, ContractOutcome.VALID, "Olá! Como posso ajudar?",
         "Olá! Como posso ajudar?"),
        (calls[1].pk, 1, 98, "", "model_requested", True, True, ContractOutcome.VALID,
         "Olá! Como posso ajudar?", "Vou chamar alguém da equipe."),
        (calls[2].pk, 1, 1, "", "", False, False, ContractOutcome.VALID, "Olá! Como posso ajudar?",
         "Olá! Como posso ajudar?"),
    ]  # fmt: skip
    # Nothing sent, nothing changed, nothing recorded.
    assert len(fake_graph.requests) == sent_before
    assert database_state() == before


def test_the_drafts_text_reaches_the_model_with_the_recorded_customer_messages(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    session = conversation(instance)
    record_turn(session, "Oi", GREETING, model=model, capture=django_capture_on_commit_callbacks)
    recorded = record_turn(
        session,
        "Preciso analisar a água do poço",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    production = model.requests[-1]
    model.reset()
    model.queue_text(GREETING)

    run = replay(last_n=1)

    [sent] = model.requests
    assert DRAFT_TEXT in sent["instructions"]
    assert "Você é a triagem do laboratório (rascunho)" not in production["instructions"]
    # The same conversation as the recorded call saw it: the messages and their order, then
    # the context item, as production sends it.
    assert sent["input"][:-1] == production["input"][:-1]
    assert [m["content"] for m in sent["input"][:-1]] == [
        "Oi",
        "Olá! Como posso ajudar?",
        "Preciso analisar a água do poço",
    ]
    assert [m["role"] for m in sent["input"]][-1:] == ["developer"]
    assert sent["input"][-1]["content"].startswith("# Contexto desta conversa")
    assert sent["model"] == "gpt-4o-mini"
    # Everything after the prompt text (the metadata at the call's time, the guards) is the
    # recorded call's.
    tail = sent["instructions"].split(DRAFT_TEXT)[1]
    assert tail.startswith("\n\n")
    assert len(tail) > 500
    assert production["instructions"].endswith(tail)
    assert ReplayResult.objects.get(run=run).llm_call_id == recorded.pk


def test_a_provider_error_is_that_calls_result_and_the_run_goes_on(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    calls = three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    model.queue_error(400)
    model.queue_text(GREETING)

    run = replay(last_n=2)

    assert (run.status, run.calls_done, run.provider_errors, run.code_changed) == (
        ReplayStatus.DONE,
        2,
        1,
        0,
    )
    failed, answered = ReplayResult.objects.filter(run=run).order_by("recorded_at")
    assert (failed.llm_call_id, failed.recorded_code, failed.replayed_code, failed.contract) == (
        calls[1].pk,
        1,
        None,
        "",
    )
    assert failed.error == "HTTP 400: Error code: 400 - Invalid value for 'input'."
    assert (answered.replayed_code, answered.contract, answered.error) == (
        1,
        ContractOutcome.VALID,
        "",
    )


def test_answers_are_read_like_a_turn_reads_them_repair_and_contract_errors_counted(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    capture = django_capture_on_commit_callbacks
    # A recorded answer that only parsed after the turn's format repair.
    session = conversation(instance)
    support_inbound_text = "Oi"
    model.queue_text('{"s":1}Olá! Como posso ajudar?')  # the turn's repair answers this
    repaired_call = record_turn(
        session, support_inbound_text, 'Claro! {"s":1}Olá!', model=model, capture=capture
    )
    plain_call = record_turn(
        conversation(instance), "Bom dia", GREETING, model=model, capture=capture
    )
    model.reset()
    model.queue_text('Resposta: {"s":1}Olá!')  # the draft's answer needs a repair...
    model.queue_text('{"s":1}Olá!')  # ...which the repair call gives
    model.queue_text('{"s":98}')  # no "motivo": the contract refuses it

    run = replay()

    assert (
        run.calls_done,
        run.repaired,
        run.contract_errors,
        run.code_changed,
        run.handoff_changed,
        run.tokens_input,
    ) == (2, 1, 1, 1, 1, 30)
    rows = list(
        ReplayResult.objects.filter(run=run)
        .order_by("recorded_at")
        .values_list(
            "llm_call_id", "recorded_code", "replayed_code", "replayed_handoff", "contract"
        )
    )
    assert rows == [
        (repaired_call.pk, 1, 1, "", ContractOutcome.REPAIRED),
        (plain_call.pk, 1, 98, "llm_invalid_contract", ContractOutcome.FAILED),
    ]
    assert model.requests[1]["input"] == [{"role": "user", "content": 'Resposta: {"s":1}Olá!'}]


def test_the_calls_cap_replays_the_newest_calls_and_stops_capped(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    calls = three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    model.queue_text(GREETING)
    model.queue_text(GREETING)
    settings.REPLAY_MAX_CALLS = 2

    run = replay()

    assert (run.status, run.calls_selected, run.calls_done, model.request_count) == (
        ReplayStatus.CAPPED,
        3,
        2,
        2,
    )
    assert run.detail == (
        "Parou no limite REPLAY_MAX_CALLS: 2 das 3 chamadas selecionadas foram testadas."
    )
    assert list(
        ReplayResult.objects.filter(run=run)
        .order_by("recorded_at")
        .values_list("llm_call_id", flat=True)
    ) == [calls[1].pk, calls[2].pk]


def test_the_cost_cap_stops_the_run_once_the_cost_reaches_it(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    model.queue_text(GREETING, input_tokens=1000, output_tokens=100)
    settings.REPLAY_MAX_COST_USD = 0.0002

    run = replay()

    assert (run.status, run.calls_selected, run.calls_done, model.request_count, run.cost_usd) == (
        ReplayStatus.CAPPED,
        3,
        1,
        1,
        Decimal("0.000210"),
    )
    assert run.detail == (
        "Parou no limite REPLAY_MAX_COST_USD: as chamadas custaram US$ 0,000210 "
        "(limite US$ 0,0002)."
    )


def test_cached_input_is_priced_at_its_price_in_the_results_the_totals_and_the_cap(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    # gpt-4o-mini: 200 × 0.15 + 800 × 0.075 + 100 × 0.60 per million = US$ 0.000150 a call
    # (0.000210 with no cache: the cap below would stop the run after one call).
    for _ in range(2):
        model.queue_text(GREETING, input_tokens=1000, cached_tokens=800, output_tokens=100)
    settings.REPLAY_MAX_COST_USD = 0.0002

    run = replay()

    assert (
        run.status,
        run.calls_done,
        model.request_count,
        run.tokens_input,
        run.cached_tokens,
        run.tokens_output,
        run.cost_usd,
    ) == (ReplayStatus.CAPPED, 2, 2, 2000, 1600, 200, Decimal("0.000300"))
    assert (
        list(
            ReplayResult.objects.filter(run=run)
            .order_by("id")
            .values_list("tokens_input", "cached_tokens", "tokens_output", "cost_usd")
        )
        == [(1000, 800, 100, Decimal("0.000150"))] * 2
    )


# One call of 1000 input and 100 output tokens of gpt-4o-mini costs US$ 0.000210.
@pytest.mark.parametrize(
    ("cap", "calls_done", "cost"),
    [
        (0.00020, 1, "0.000210"),  # just below one call's cost
        (0.00021, 1, "0.000210"),  # exactly one call's cost: reached, no second call
        (0.00022, 2, "0.000420"),  # just above: a second call, which reaches it
    ],
)
def test_the_cost_cap_at_one_calls_cost(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    cap: float,
    calls_done: int,
    cost: str,
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    for _ in range(calls_done):
        model.queue_text(GREETING, input_tokens=1000, output_tokens=100)
    settings.REPLAY_MAX_COST_USD = cap

    run = replay()

    assert (run.status, run.calls_done, model.request_count, run.cost_usd) == (
        ReplayStatus.CAPPED,
        calls_done,
        calls_done,
        Decimal(cost),
    )


@pytest.mark.parametrize(
    ("max_calls", "status", "calls_done"),
    [
        (1, ReplayStatus.CAPPED, 1),  # a cap of one call: capped after that call
        (2, ReplayStatus.CAPPED, 2),  # one below the three selected
        (3, ReplayStatus.DONE, 3),  # exactly the selected calls: nothing left out
        (4, ReplayStatus.DONE, 3),  # one above
    ],
)
def test_the_calls_cap_around_the_selected_count(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    max_calls: int,
    status: ReplayStatus,
    calls_done: int,
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    for _ in range(calls_done):
        model.queue_text(GREETING)
    settings.REPLAY_MAX_CALLS = max_calls

    run = replay()

    assert (run.status, run.calls_selected, run.calls_done, model.request_count) == (
        status,
        3,
        calls_done,
        calls_done,
    )


def test_an_answer_naming_an_unlisted_model_is_priced_as_the_model_asked_for(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    # What OpenAI names in its answers: the dated snapshot, which the price table does not list.
    model.queue_text(GREETING, model="gpt-4o-mini-2024-07-18", input_tokens=1000, output_tokens=100)

    run = replay(last_n=1)

    assert (run.status, run.calls_done, run.cost_usd) == (
        ReplayStatus.DONE,
        1,
        Decimal("0.000210"),
    )
    assert list(run.results.values_list("cost_usd", flat=True)) == [Decimal("0.000210")]


def test_a_run_of_a_model_with_no_listed_price_is_refused_at_its_start(
    instance: Instance, settings: Any
) -> None:
    settings.OPENAI_MODEL_TRIAGE = "gpt-9-unlisted"

    with pytest.raises(ReplayRefused) as refused:
        replay_run_start(override=draft(), filters=ReplayFilters(), user=None)

    assert str(refused.value) == (
        "Sem preço para o modelo gpt-9-unlisted (conversations/model_prices.py): o teste não "
        "conseguiria respeitar REPLAY_MAX_COST_USD."
    )
    assert ReplayRun.objects.count() == 0


def test_a_queued_run_whose_model_lost_its_price_fails_without_a_call(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    ReplayRun.objects.filter(pk=run.pk).update(model="gpt-9-unlisted")

    run = replay_run_execute(run_id=run.pk)

    assert (run.status, run.calls_done, model.request_count, run.started_at) == (
        ReplayStatus.FAILED,
        0,
        0,
        None,
    )
    assert run.detail.startswith("Sem preço para o modelo gpt-9-unlisted ")


def test_a_run_cancelled_before_it_starts_calls_no_model(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    three_greetings(instance, model, django_capture_on_commit_callbacks)
    model.reset()
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    ReplayRun.objects.filter(pk=run.pk).update(cancel_requested=True)

    run = replay_run_execute(run_id=run.pk)

    assert (run.status, run.calls_done, model.request_count, run.results.count()) == (
        ReplayStatus.CANCELLED,
        0,
        0,
        0,
    )


def test_loaded_packages_are_replayed_at_the_version_the_call_was_given(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    package = KBPackage.objects.create(
        package_id="COLETA_AGUA",
        title="Coleta de água",
        description="Como coletar",
        content="Versão antiga: use o frasco azul.",
    )
    session = conversation(instance, loaded_packages=["COLETA_AGUA"])
    call = record_turn(
        session, "Como coleto?", GREETING, model=model, capture=django_capture_on_commit_callbacks
    )
    package.content = "Versão nova: use o frasco verde."
    package.save()
    model.reset()
    model.queue_text(GREETING)

    replay()

    [sent] = model.requests
    assert "Versão antiga: use o frasco azul." in sent["input"][0]["content"]
    assert "frasco verde" not in json.dumps(sent, ensure_ascii=False)
    assert (call.context_snapshot or {})["loaded_packages"] == [
        {"package_id": "COLETA_AGUA", "version": package.history.earliest().history_id}
    ]


def test_the_options_of_both_answers_are_compared_on_the_text_s_last_line(
    instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: Any,
) -> None:
    offered = '{"s":1,"opcoes":["Orçamento","Agendar coleta"]}Como posso ajudar?'
    call = record_turn(
        conversation(instance),
        "Oi",
        offered,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    model.reset()
    model.queue_text('{"s":1,"opcoes":["Orçamento","Acompanhar pedido"]}Como posso ajudar?')

    run = replay()

    result = ReplayResult.objects.get(run=run, llm_call=call)
    assert (result.recorded_text, result.replayed_text, result.code_changed) == (
        "Como posso ajudar?\n[opções: Orçamento | Agendar coleta]",
        "Como posso ajudar?\n[opções: Orçamento | Acompanhar pedido]",
        False,
    )
    assert result.replayed_raw == (
        '{"s":1,"opcoes":["Orçamento","Acompanhar pedido"]}Como posso ajudar?'
    )
