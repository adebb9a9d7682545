"""The activation gate: activating an override shows the latest replay of exactly its text; without
one, or over a threshold, the save is refused once and needs a confirmation with a reason, which the
override's history records.

The replays are real `governance.ReplayRun` rows read through the evidence the governance app
registers (`governance.activation.DatabaseReplayEvidence`).
"""

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation
from model_bakery import baker

from governance.activation import DatabaseReplayEvidence
from governance.models import ReplayRun, ReplayStatus
from prompts_admin.activation import (
    ReplaySummary,
    StoredOverride,
    exceeded_thresholds,
    is_activation,
)
from prompts_admin.models import PromptOverride, prompt_content_hash

pytestmark = pytest.mark.django_db

BASE = "/admin/prompts_admin/promptoverride/"
ADD_URL = BASE + "add/"
TEXT = "Você é {{ agent_name }}.\nResponda em português."
TEXT_CRLF = TEXT.replace("\n", "\r\n")
REASON = "Correção urgente de um erro de digitação"

NO_REPLAY_REFUSED = (
    "Nenhum teste deste texto em conversas gravadas: ativá-lo coloca diante dos clientes um "
    "prompt que ninguém testou. Teste-o antes, ou marque “Ativar mesmo assim”, escreva o motivo "
    "da alteração e salve de novo."
)
REASON_REQUIRED = (
    "Escreva no motivo da alteração por que ativa este texto mesmo assim: ele fica no histórico."
)


def over_limit(run: int, exceeded: str) -> str:
    return (
        f"O último teste deste texto em conversas gravadas (#{run}) passou do limite: {exceeded}. "
        "Marque “Ativar mesmo assim”, escreva o motivo da alteração e salve de novo."
    )


def replay(
    *,
    agent: str = "triagem",
    content: str = TEXT,
    status: str = ReplayStatus.DONE,
    calls: int = 100,
    codes: int = 0,
    handoffs: int = 0,
    errors: int = 0,
    cost: str = "0.123400",
    minutes_ago: int = 0,
) -> ReplayRun:
    run: ReplayRun = baker.make(
        ReplayRun,
        agent=agent,
        content=content,
        content_hash=prompt_content_hash(content),
        status=status,
        calls_selected=calls,
        calls_done=calls,
        code_changed=codes,
        handoff_changed=handoffs,
        contract_errors=errors,
        cost_usd=Decimal(cost),
        created_at=timezone.now() - timedelta(minutes=minutes_ago),
    )
    return run


def form(**fields: str | None) -> dict[str, str]:
    data: dict[str, str | None] = {
        "agent": "triagem",
        "content": TEXT_CRLF,  # as a browser submits a textarea
        "note": "",
        "is_active": "on",
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200
    errors: dict[str, list[str]] = response.context["adminform"].form.errors
    return errors


def reasons(override: PromptOverride) -> list[str | None]:
    """The change reasons of the override's versions, oldest first."""
    return list(
        PromptOverride.history.filter(id=override.pk)
        .order_by("history_date", "history_id")
        .values_list("history_change_reason", flat=True)
    )


def run_url(run: ReplayRun) -> str:
    """The run's admin page, when the governance admin is installed (the replay's own work)."""
    registered = admin.site.is_registered(ReplayRun)
    return f"/admin/governance/replayrun/{run.pk}/change/" if registered else ""


# --- What counts as activating ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "agent", "content", "active", "expected"),
    [
        (None, "triagem", TEXT, True, True),
        (None, "triagem", TEXT, False, False),
        (StoredOverride("triagem", TEXT, False), "triagem", TEXT, True, True),
        (StoredOverride("triagem", TEXT, False), "triagem", "Outro", False, False),
        (StoredOverride("triagem", TEXT, True), "triagem", TEXT, True, False),
        (StoredOverride("triagem", TEXT, True), "triagem", TEXT_CRLF, True, False),
        (StoredOverride("triagem", TEXT, True), "triagem", TEXT + " ", True, True),
        (StoredOverride("triagem", TEXT, True), "coleta", TEXT, True, True),
        (StoredOverride("triagem", TEXT, True), "triagem", TEXT, False, False),
    ],
    ids=[
        "new-active",
        "new-draft",
        "draft-activated",
        "draft-edited",
        "active-unchanged",
        "active-crlf-resubmitted",
        "active-text-changed",
        "active-moved-to-another-agent",
        "active-deactivated",
    ],
)
def test_what_counts_as_activating(
    stored: StoredOverride | None, agent: str, content: str, active: bool, expected: bool
) -> None:
    assert is_activation(stored=stored, agent=agent, content=content, active=active) is expected


def test_crlf_and_lf_texts_have_the_same_hash() -> None:
    assert prompt_content_hash(TEXT_CRLF) == prompt_content_hash(TEXT)
    assert prompt_content_hash(TEXT.replace("\n", "\r")) == prompt_content_hash(TEXT)
    assert prompt_content_hash(TEXT + "\n") != prompt_content_hash(TEXT)


# --- Thresholds ----------------------------------------------------------------------------------


def summary(calls: int, *, codes: int = 0, handoffs: int = 0, errors: int = 0) -> ReplaySummary:
    return ReplaySummary(
        run_id=7,
        status="done",
        calls_done=calls,
        code_changed=codes,
        handoff_changed=handoffs,
        contract_errors=errors,
        cost_usd=Decimal("0"),
        created_at=timezone.now(),
        admin_url="",
    )


@pytest.mark.parametrize(
    ("totals", "expected"),
    [
        (summary(100, handoffs=10), []),
        (summary(1000, handoffs=101), ["transferências 10,1% > 10%"]),
        (summary(100, codes=25), []),
        (summary(100, codes=26), ["códigos 26,0% > 25%"]),
        (summary(100, errors=5), []),
        (summary(1000, errors=51), ["erros de contrato 5,1% > 5%"]),
        (summary(3, handoffs=1), ["transferências 33,3% > 10%"]),
        (
            summary(10, codes=3, handoffs=2, errors=1),
            ["transferências 20,0% > 10%", "códigos 30,0% > 25%", "erros de contrato 10,0% > 5%"],
        ),
    ],
    ids=[
        "handoffs-at-10",
        "handoffs-10.1",
        "codes-at-25",
        "codes-26",
        "errors-at-5",
        "errors-5.1",
        "one-of-three",
        "all-three",
    ],
)
def test_thresholds_pass_at_the_limit_and_ask_above_it(
    totals: ReplaySummary, expected: list[str]
) -> None:
    with translation.override("pt-br"):
        assert [str(e) for e in exceeded_thresholds(totals)] == expected


@override_settings(ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT=12.5)
def test_a_fractional_limit_is_shown_as_set() -> None:
    with translation.override("pt-br"):
        assert [str(e) for e in exceeded_thresholds(summary(1000, handoffs=126))] == [
            "transferências 12,6% > 12,5%"
        ]
        assert exceeded_thresholds(summary(1000, handoffs=125)) == []


# --- Which replay is the evidence ------------------------------------------------------------------


def test_the_evidence_is_the_latest_finished_replay_of_the_agent_and_text() -> None:
    replay(minutes_ago=30, handoffs=1)
    latest = replay(minutes_ago=10, handoffs=2, status=ReplayStatus.CAPPED)
    replay(minutes_ago=5, status=ReplayStatus.CANCELLED, calls=0)  # replayed nothing
    replay(minutes_ago=4, status=ReplayStatus.FAILED)
    replay(minutes_ago=3, status=ReplayStatus.RUNNING)
    replay(minutes_ago=2, status=ReplayStatus.QUEUED)
    replay(minutes_ago=1, agent="coleta")  # the same text for another agent
    replay(minutes_ago=1, content=TEXT + " ")  # another text

    found = DatabaseReplayEvidence().latest_replay("triagem", prompt_content_hash(TEXT_CRLF))

    assert found == ReplaySummary(
        run_id=latest.pk,
        status="capped",
        calls_done=100,
        code_changed=0,
        handoff_changed=2,
        contract_errors=0,
        cost_usd=Decimal("0.123400"),
        created_at=latest.created_at,
        admin_url=run_url(latest),
    )


@pytest.mark.parametrize(
    ("status", "counts"),
    [
        (ReplayStatus.DONE, True),
        (ReplayStatus.CAPPED, True),
        (ReplayStatus.CANCELLED, True),
        (ReplayStatus.FAILED, False),
        (ReplayStatus.RUNNING, False),
        (ReplayStatus.QUEUED, False),
    ],
)
def test_which_runs_count_as_evidence(status: str, counts: bool) -> None:
    run = replay(status=status)

    found = DatabaseReplayEvidence().latest_replay("triagem", prompt_content_hash(TEXT))

    assert (found.run_id if found else None) == (run.pk if counts else None)


def test_a_done_run_that_replayed_no_call_is_no_evidence() -> None:
    replay(calls=0)

    assert DatabaseReplayEvidence().latest_replay("triagem", prompt_content_hash(TEXT)) is None


# --- Activating without a replay ---------------------------------------------------------------


def test_activating_without_a_replay_is_refused_once_and_writes_nothing(
    admin_client: Client,
) -> None:
    response = admin_client.post(ADD_URL, form())

    assert errors_of(response) == {"confirm_activation": [NO_REPLAY_REFUSED]}
    page = response.content.decode()
    assert '<input type="checkbox" name="confirm_activation"' in page
    assert "Ativar mesmo assim" in page
    assert '<input type="text" name="change_reason" class="vTextField" maxlength="255"' in page
    assert '<label for="id_change_reason">Motivo da alteração:</label>' in page
    assert PromptOverride.objects.count() == 0
    assert PromptOverride.history.count() == 0


def test_the_confirmation_needs_a_reason(admin_client: Client) -> None:
    blank = admin_client.post(ADD_URL, form(confirm_activation="on", change_reason="   "))
    too_long = admin_client.post(ADD_URL, form(confirm_activation="on", change_reason="x" * 256))

    assert errors_of(blank) == {"change_reason": [REASON_REQUIRED]}
    assert errors_of(too_long) == {
        "change_reason": [
            "Certifique-se de que o valor tenha no máximo 255 caracteres (ele possui 256)."
        ]
    }
    assert PromptOverride.objects.count() == 0


def test_the_confirmed_activation_records_its_reason_in_the_history(
    admin_client: Client,
) -> None:
    response = admin_client.post(
        ADD_URL, form(confirm_activation="on", change_reason=f"  {REASON}  ")
    )

    assert response.status_code == 302
    override = PromptOverride.objects.get()
    assert (override.is_active, override.content) == (True, TEXT_CRLF)
    assert reasons(override) == [f"Ativado sem teste em conversas gravadas: {REASON}"]
    page = admin_client.get(response["Location"]).content.decode()
    assert '<li class="warning">Nenhum teste deste texto em conversas gravadas.</li>' in page


def test_the_longest_reason_is_recorded_whole(admin_client: Client) -> None:
    reason = "r" * 255

    response = admin_client.post(ADD_URL, form(confirm_activation="on", change_reason=reason))

    assert response.status_code == 302
    assert reasons(PromptOverride.objects.get()) == [
        f"Ativado sem teste em conversas gravadas: {reason}"
    ]


def test_the_history_page_shows_the_change_reason(admin_client: Client) -> None:
    admin_client.post(ADD_URL, form(confirm_activation="on", change_reason=REASON))
    override = PromptOverride.objects.get()

    page = admin_client.get(f"{BASE}{override.pk}/history/").content.decode()

    assert '<th scope="col">Motivo da alteração</th>' in page
    assert (
        f'<td class="history-change-reason">Ativado sem teste em conversas gravadas: {REASON}</td>'
        in page
    )


# --- Activating with a replay ----------------------------------------------------------------------


def test_activating_within_the_thresholds_goes_through_and_names_the_replay(
    admin_client: Client,
) -> None:
    run = replay(calls=40, codes=10, handoffs=4, errors=2, cost="0.051234")
    draft = PromptOverride.objects.create(agent="triagem", content=TEXT)

    response = admin_client.post(f"{BASE}{draft.pk}/change/", form())

    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.is_active is True
    assert reasons(draft) == [None, f"Ativado com o teste #{run.pk}"]
    page = admin_client.get(response["Location"]).content.decode()
    assert (
        f'<li class="info">Último teste deste texto em conversas gravadas (#{run.pk}): 40 chamadas, 10 códigos '
        "mudaram, 4 transferências mudaram, 2 erros de contrato, custo US$ 0,0512."
    ) in page


def test_activating_over_a_threshold_asks_and_says_which_with_numbers(
    admin_client: Client,
) -> None:
    run = replay(calls=50, handoffs=10)
    draft = PromptOverride.objects.create(agent="triagem", content=TEXT)
    url = f"{BASE}{draft.pk}/change/"

    refused = admin_client.post(url, form())

    assert errors_of(refused) == {
        "confirm_activation": [over_limit(run.pk, "transferências 20,0% > 10%")]
    }
    assert PromptOverride.objects.get().is_active is False

    confirmed = admin_client.post(url, form(confirm_activation="on", change_reason=REASON))

    assert confirmed.status_code == 302
    assert reasons(draft) == [
        None,
        f"Ativado acima do limite (transferências 20,0% > 10%): {REASON}",
    ]


def test_every_threshold_over_is_named(admin_client: Client) -> None:
    run = replay(calls=10, codes=3, handoffs=2, errors=1)

    refused = admin_client.post(ADD_URL, form())

    assert errors_of(refused) == {
        "confirm_activation": [
            over_limit(
                run.pk,
                "transferências 20,0% > 10%; códigos 30,0% > 25%; erros de contrato 10,0% > 5%",
            )
        ]
    }


def test_a_replay_exactly_at_the_limit_passes_and_just_above_asks(admin_client: Client) -> None:
    at_limit = replay(calls=100, handoffs=10)
    other = "Outro texto de {{ agent_name }}."
    above = replay(agent="coleta", content=other, calls=1000, handoffs=101)

    passed = admin_client.post(ADD_URL, form())
    asked = admin_client.post(ADD_URL, form(agent="coleta", content=other))

    assert passed.status_code == 302
    assert reasons(PromptOverride.objects.get()) == [f"Ativado com o teste #{at_limit.pk}"]
    assert errors_of(asked) == {
        "confirm_activation": [over_limit(above.pk, "transferências 10,1% > 10%")]
    }


def test_a_replay_of_another_text_is_no_evidence(admin_client: Client) -> None:
    replay(content=TEXT + "\nMais uma linha.")

    refused = admin_client.post(ADD_URL, form())

    assert errors_of(refused) == {"confirm_activation": [NO_REPLAY_REFUSED]}


# --- Edits of the active override and drafts -------------------------------------------------------


def test_editing_the_text_of_the_active_override_asks(admin_client: Client) -> None:
    active = PromptOverride.objects.create(agent="triagem", content=TEXT, is_active=True)
    url = f"{BASE}{active.pk}/change/"

    refused = admin_client.post(url, form(content="Texto novo de {{ agent_name }}"))

    assert errors_of(refused) == {"confirm_activation": [NO_REPLAY_REFUSED]}
    assert PromptOverride.objects.get().content == TEXT


def test_editing_the_note_of_the_active_override_does_not_ask(admin_client: Client) -> None:
    active = PromptOverride.objects.create(agent="triagem", content=TEXT, is_active=True)

    # The browser submits the same text with CRLF: the same hash, no activation.
    response = admin_client.post(f"{BASE}{active.pk}/change/", form(note="só a nota"))

    assert response.status_code == 302
    assert reasons(active) == [None, None]


def test_saving_a_draft_never_asks(admin_client: Client) -> None:
    replay(calls=10, handoffs=10)  # a replay far over the limit does not matter for a draft

    added = admin_client.post(ADD_URL, form(is_active=None))
    draft = PromptOverride.objects.get()
    edited = admin_client.post(
        f"{BASE}{draft.pk}/change/", form(content="Outro rascunho", is_active=None)
    )

    assert (added.status_code, edited.status_code) == (302, 302)
    assert reasons(draft) == [None, None]
    assert PromptOverride.objects.get().is_active is False


def test_moving_the_active_override_to_another_agent_asks_both_confirmations(
    admin_client: Client,
) -> None:
    active = PromptOverride.objects.create(agent="triagem", content=TEXT, is_active=True)
    url = f"{BASE}{active.pk}/change/"

    refused = admin_client.post(url, form(agent="coleta"))

    assert list(errors_of(refused)) == ["confirm_builtin", "confirm_activation"]
    assert errors_of(refused)["confirm_activation"] == [NO_REPLAY_REFUSED]
    confirmed = admin_client.post(
        url,
        form(agent="coleta", confirm_builtin="on", confirm_activation="on", change_reason="x"),
    )
    assert confirmed.status_code == 302
    assert reasons(active) == [None, "Ativado sem teste em conversas gravadas: x"]


# --- The revert page is gated too ------------------------------------------------------------------


def test_reverting_to_a_version_and_activating_it_is_gated(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="triagem", content=TEXT)
    v1 = override.history.get().history_id
    override.content = "Rascunho 2"
    override.save()
    url = f"{BASE}{override.pk}/history/{v1}/"

    refused = admin_client.post(url, form())

    assert errors_of(refused) == {"confirm_activation": [NO_REPLAY_REFUSED]}
    assert (PromptOverride.objects.get().content, override.history.count()) == ("Rascunho 2", 2)

    confirmed = admin_client.post(url, form(confirm_activation="on", change_reason=REASON))

    assert confirmed.status_code == 302
    override.refresh_from_db()
    assert (override.content, override.is_active) == (TEXT_CRLF, True)
    assert reasons(override) == [None, None, f"Ativado sem teste em conversas gravadas: {REASON}"]


def test_reverting_the_active_override_to_a_replayed_version_passes(admin_client: Client) -> None:
    run = replay()
    override = PromptOverride.objects.create(agent="triagem", content=TEXT, is_active=True)
    v1 = override.history.get().history_id
    PromptOverride.objects.filter(pk=override.pk).update(content="Texto sem simulação")

    response = admin_client.post(f"{BASE}{override.pk}/history/{v1}/", form())

    assert response.status_code == 302
    assert reasons(override) == [None, f"Ativado com o teste #{run.pk}"]


# --- The evidence is shown before ticking "active" --------------------------------------------------


def test_the_change_page_shows_the_evidence_of_the_stored_text(admin_client: Client) -> None:
    run = replay(calls=40, codes=1, handoffs=2, errors=3, cost="1.5")
    replayed = PromptOverride.objects.create(agent="triagem", content=TEXT)
    untested = PromptOverride.objects.create(agent="triagem", content="Sem simulação")

    replayed_page = admin_client.get(f"{BASE}{replayed.pk}/change/").content.decode()
    untested_page = admin_client.get(f"{BASE}{untested.pk}/change/").content.decode()

    sentence = (
        f"Último teste deste texto em conversas gravadas (#{run.pk}): 40 chamadas, 1 códigos "
        "mudaram, 2 transferências mudaram, 3 erros de contrato, custo US$ 1,5000."
    )
    link = f' <a href="{run_url(run)}">Ver o teste</a>' if run_url(run) else ""
    assert f"são sempre anexadas.<br>{sentence}{link}</div>" in replayed_page
    assert (
        "são sempre anexadas.<br>Nenhum teste deste texto em conversas gravadas.</div>"
        in untested_page
    )
    assert '<div class="form-row hidden field-confirm_activation">' in replayed_page
    # The change reason is always there: the gate only makes it required.
    assert '<div class="form-row field-change_reason">' in replayed_page
    assert '<input type="checkbox" name="confirm_activation"' not in replayed_page


def test_the_revert_page_shows_the_evidence_of_that_version(admin_client: Client) -> None:
    run = replay()
    override = PromptOverride.objects.create(agent="triagem", content=TEXT)
    v1 = override.history.get().history_id
    override.content = "Outro"
    override.save()

    page = admin_client.get(f"{BASE}{override.pk}/history/{v1}/").content.decode()

    assert f"<br>Último teste deste texto em conversas gravadas (#{run.pk}): 100 chamadas" in page


def test_the_history_reason_is_in_the_sites_language_whatever_the_browsers(
    admin_client: Client,
) -> None:
    response = admin_client.post(
        ADD_URL,
        form(confirm_activation="on", change_reason=REASON),
        HTTP_ACCEPT_LANGUAGE="en",
    )

    assert response.status_code == 302
    assert reasons(PromptOverride.objects.get()) == [
        f"Ativado sem teste em conversas gravadas: {REASON}"
    ]


# --- Who may -----------------------------------------------------------------------------------------


def test_a_prompt_editor_activates_with_a_confirmation(prompt_editor_client: Client) -> None:
    refused = prompt_editor_client.post(ADD_URL, form())
    confirmed = prompt_editor_client.post(
        ADD_URL, form(confirm_activation="on", change_reason=REASON)
    )

    assert errors_of(refused) == {"confirm_activation": [NO_REPLAY_REFUSED]}
    assert confirmed.status_code == 302
    assert reasons(PromptOverride.objects.get()) == [
        f"Ativado sem teste em conversas gravadas: {REASON}"
    ]


def test_support_cannot_activate_even_with_a_confirmation(support_client: Client) -> None:
    draft = PromptOverride.objects.create(agent="triagem", content=TEXT)
    v1 = draft.history.get().history_id
    confirmed = form(confirm_activation="on", change_reason=REASON)

    responses = [
        support_client.post(ADD_URL, confirmed).status_code,
        support_client.post(f"{BASE}{draft.pk}/change/", confirmed).status_code,
        support_client.post(f"{BASE}{draft.pk}/history/{v1}/", confirmed).status_code,
    ]

    assert responses == [403, 403, 403]
    assert list(PromptOverride.objects.values_list("is_active", flat=True)) == [False]
    assert reasons(draft) == [None]


def test_the_override_admin_has_no_list_editing_nor_actions_that_could_activate() -> None:
    model_admin = admin.site._registry[PromptOverride]

    assert model_admin.list_editable == ()
    assert model_admin.actions == []


def test_the_evidence_is_read_once_per_request(admin_client: Client) -> None:
    replay()

    with CaptureQueriesContext(connection) as page:
        admin_client.get(ADD_URL + "?from_builtin=triagem")
    with CaptureQueriesContext(connection) as refused:
        # The posted text (CRLF) and the cleaned one have one hash: one lookup for both.
        admin_client.post(ADD_URL, form(content="Outro texto\r\nde {{ agent_name }}"))

    def lookups(queries: CaptureQueriesContext) -> int:
        return sum('FROM "governance_replayrun"' in q["sql"] for q in queries.captured_queries)

    assert (lookups(page), lookups(refused)) == (1, 1)
