"""The replay in the admin: start from an override, follow the progress, cancel, read the results;
prompt editors may, Support may not; customer text masked without the permission to view personal
data."""

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from model_bakery import baker

from conversations.models import Instance, LLMCall, Session
from governance.models import ContractOutcome, ReplayResult, ReplayRun, ReplayStatus
from prompts_admin.models import PromptOverride
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import DRAFT_TEXT, GREETING, conversation, draft, record_turn

pytestmark = pytest.mark.django_db


def start_url(override: PromptOverride) -> str:
    return f"{reverse('admin:governance_replayrun_start')}?override={override.pk}"


def run_url(run: ReplayRun, view: str = "change") -> str:
    return reverse(f"admin:governance_replayrun_{view}", args=[run.pk])


def form_token(client: Client, override: PromptOverride) -> str:
    """The one-time token the start page renders in its form."""
    token: str = client.get(start_url(override)).context["form_token"]
    return token


def queued_run(override: PromptOverride, **fields: Any) -> ReplayRun:
    run: ReplayRun = ReplayRun.objects.create(
        override=override,
        agent=override.agent,
        content=override.content,
        content_hash="h",
        model="gpt-4o-mini",
        **fields,
    )
    return run


def result(run: ReplayRun, session: Session, **fields: Any) -> ReplayResult:
    values: dict[str, Any] = {
        "recorded_prompt_version": "builtin",
        "recorded_code": 1,
        "replayed_code": 98,
        "recorded_handoff": "",
        "replayed_handoff": "model_requested",
        "contract": ContractOutcome.VALID,
        "code_changed": True,
        "handoff_changed": True,
        "recorded_text": "Olá! Como posso ajudar?",
        "replayed_text": "Vou chamar alguém da equipe.",
        **fields,
    }
    row: ReplayResult = ReplayResult.objects.create(run=run, session=session, **values)
    return row


# --- Permissions --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "abc", "²", "9" * 30])
def test_a_start_without_an_override_id_is_not_found(admin_client: Client, value: str) -> None:
    draft()
    url = f"{reverse('admin:governance_replayrun_start')}?override={value}"

    assert admin_client.get(url).status_code == 404


def test_support_may_not_start_read_follow_or_cancel_a_replay(support_client: Client) -> None:
    override = draft()
    run = queued_run(override)

    responses = [
        support_client.get(start_url(override)).status_code,
        support_client.post(start_url(override), {"override": override.pk}).status_code,
        support_client.get(run_url(run)).status_code,
        support_client.get(run_url(run, "progress")).status_code,
        support_client.post(run_url(run, "cancel")).status_code,
        support_client.get(reverse("admin:governance_replayrun_changelist")).status_code,
    ]

    assert responses == [403, 403, 403, 403, 403, 403]
    assert ReplayRun.objects.get().cancel_requested is False
    assert ReplayRun.objects.count() == 1


def test_a_reader_without_add_or_change_may_read_but_not_start_or_cancel(db: None) -> None:
    from tests.helpers.staff import logged_in, staff_member

    reader = logged_in(staff_member(permissions=("governance.view_replayrun",)))
    override = draft()
    run = queued_run(override)

    assert reader.get(run_url(run)).status_code == 200
    assert reader.get(start_url(override)).status_code == 403
    assert reader.post(run_url(run, "cancel")).status_code == 403
    assert ReplayRun.objects.get().cancel_requested is False


def test_cancel_is_post_only(prompt_editor_client: Client) -> None:
    run = queued_run(draft())

    assert prompt_editor_client.get(run_url(run, "cancel")).status_code == 405


# --- Start, progress, cancel --------------------------------------------------------------------


def test_the_start_page_counts_the_matching_calls(
    prompt_editor_client: Client,
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    for text in ("Oi", "Bom dia"):
        record_turn(
            conversation(instance),
            text,
            GREETING,
            model=model,
            capture=django_capture_on_commit_callbacks,
        )
    override = draft()

    everything = prompt_editor_client.get(start_url(override))
    newest = prompt_editor_client.get(start_url(override) + "&count=1&last_n=1")

    assert everything.status_code == 200
    assert everything.context["matching"] == 2
    assert "2 chamadas gravadas correspondem." in everything.content.decode()
    assert newest.context["matching"] == 1
    assert "1 chamada gravada corresponde." in newest.content.decode()


def test_starting_a_replay_runs_it_after_commit_and_shows_its_page(
    prompt_editor_client: Client,
    prompt_editor_user: User,
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_turn(
        conversation(instance),
        "Oi",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    override = draft()
    model.reset()
    model.queue_text('{"s":98,"motivo":"outro"}Vou chamar alguém.')

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = prompt_editor_client.post(
            reverse("admin:governance_replayrun_start"),
            {
                "override": override.pk,
                "last_n": "5",
                "segment": "",
                "handoff_reason": "",
                "form_token": form_token(prompt_editor_client, override),
            },
        )

    run = ReplayRun.objects.get()
    assert len(callbacks) == 1
    assert response.status_code == 302
    assert response["Location"] == run_url(run)
    assert (run.status, run.calls_done, run.code_changed, run.created_by, run.filters) == (
        ReplayStatus.DONE,
        1,
        1,
        prompt_editor_user,
        {
            "date_from": None,
            "date_to": None,
            "segment": "",
            "handoff_reason": "",
            "last_n": 5,
        },
    )
    assert run.task_id != ""
    page = prompt_editor_client.get(run_url(run)).content.decode()
    assert "1 → 98" in page
    assert "Vou chamar alguém." in page


def test_a_second_submit_of_the_same_start_form_starts_no_second_run(
    prompt_editor_client: Client,
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_turn(
        conversation(instance),
        "Oi",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    override = draft()
    model.reset()
    model.queue_text(GREETING)
    token = form_token(prompt_editor_client, override)
    data = {"override": override.pk, "form_token": token}
    start = reverse("admin:governance_replayrun_start")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        first = prompt_editor_client.post(start, data)
        again = prompt_editor_client.post(start, data, follow=True)

    run = ReplayRun.objects.get()
    assert (len(callbacks), model.request_count, str(run.form_token)) == (1, 1, token)
    assert first["Location"] == run_url(run)
    assert again.redirect_chain == [(run_url(run), 302)]
    assert "Este teste já foi iniciado." in again.content.decode()


@pytest.mark.parametrize("token", ["", "not-a-uuid"])
def test_a_start_without_its_form_token_is_refused_and_starts_nothing(
    prompt_editor_client: Client, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    override = draft()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = prompt_editor_client.post(
            reverse("admin:governance_replayrun_start"),
            {"override": override.pk, "form_token": token},
        )

    assert (response.status_code, len(callbacks), ReplayRun.objects.count()) == (200, 0, 0)
    assert "Este formulário expirou. Recarregue a página e tente de novo." in (
        response.content.decode()
    )


def test_a_start_for_a_model_with_no_listed_price_is_refused(
    prompt_editor_client: Client, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.OPENAI_MODEL_TRIAGE = "gpt-9-unlisted"
    override = draft()

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = prompt_editor_client.post(
            reverse("admin:governance_replayrun_start"),
            {"override": override.pk, "form_token": form_token(prompt_editor_client, override)},
        )

    assert (response.status_code, len(callbacks), ReplayRun.objects.count()) == (200, 0, 0)
    assert (
        "Sem preço para o modelo gpt-9-unlisted (conversations/model_prices.py): o teste não "
        "conseguiria respeitar REPLAY_MAX_COST_USD."
    ) in response.content.decode()


def test_a_start_with_dates_in_the_wrong_order_is_refused(prompt_editor_client: Client) -> None:
    override = draft()

    response = prompt_editor_client.post(
        reverse("admin:governance_replayrun_start"),
        {"override": override.pk, "date_from": "2026-11-20", "date_to": "2026-11-10"},
    )

    assert response.status_code == 200
    assert "A data inicial é posterior à data final." in response.content.decode()
    assert ReplayRun.objects.count() == 0


def test_the_progress_json(prompt_editor_client: Client) -> None:
    run = queued_run(
        draft(),
        status=ReplayStatus.RUNNING,
        calls_selected=20,
        calls_done=7,
        code_changed=2,
        handoff_changed=1,
        contract_errors=1,
        provider_errors=0,
        cost_usd=Decimal("0.0123"),
    )

    response = prompt_editor_client.get(run_url(run, "progress"))

    assert response.json() == {
        "status": "running",
        "status_label": "em andamento",
        "finished": False,
        "cancel_requested": False,
        "done": 7,
        "selected": 20,
        "detail": "",
        "code_changed": 2,
        "handoff_changed": 1,
        "contract_errors": 1,
        "provider_errors": 0,
        "cost_usd": "0.012300",
    }


def test_cancel_ends_a_queued_run_at_once(prompt_editor_client: Client) -> None:
    run = queued_run(draft())

    response = prompt_editor_client.post(run_url(run, "cancel"))

    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.cancel_requested, run.finished_at is not None) == (
        ReplayStatus.CANCELLED,
        True,
        True,
    )


def test_cancel_asks_a_running_run_to_stop(prompt_editor_client: Client) -> None:
    run = queued_run(draft(), status=ReplayStatus.RUNNING)

    response = prompt_editor_client.post(run_url(run, "cancel"))

    assert response.status_code == 302
    assert response["Location"] == run_url(run)
    assert ReplayRun.objects.get().cancel_requested is True


def test_cancel_leaves_a_finished_run_alone(prompt_editor_client: Client) -> None:
    run = queued_run(draft(), status=ReplayStatus.DONE)

    response = prompt_editor_client.post(run_url(run, "cancel"), follow=True)

    assert ReplayRun.objects.get().cancel_requested is False
    assert "O teste já tinha terminado." in response.content.decode()


# --- The run page -------------------------------------------------------------------------------


@pytest.mark.parametrize("results", [1, 20])
def test_the_run_page_reads_its_results_in_a_constant_number_of_queries(
    prompt_editor_client: Client,
    instance: Instance,
    results: int,
    django_assert_num_queries: Any,
) -> None:
    run = queued_run(
        draft(), status=ReplayStatus.DONE, calls_selected=results, created_by=baker.make(User)
    )
    for _ in range(results):
        result(run, conversation(instance, customer_name="Maria Souza"))

    # Session, user, permissions (2), the run with its override and starter, its results with
    # their conversations.
    with django_assert_num_queries(6):
        response = prompt_editor_client.get(run_url(run))

    assert response.status_code == 200
    assert len(response.context["rows"]) == results


def test_customer_text_is_masked_for_staff_without_personal_data(
    prompt_editor_client: Client, admin_client: Client, instance: Instance
) -> None:
    run = queued_run(draft(), status=ReplayStatus.DONE)
    session = conversation(instance, customer_name="Maria Souza")
    result(
        run,
        session,
        recorded_text="Olá, Maria Souza! Como posso ajudar?",
        replayed_text="Maria Souza, vou chamar alguém.",
    )

    masked = prompt_editor_client.get(run_url(run)).content.decode()
    clear = admin_client.get(run_url(run)).content.decode()

    assert "Maria Souza" not in masked
    assert "+ M*** S***, vou chamar alguém." in masked
    assert "+ Maria Souza, vou chamar alguém." in clear


def test_the_override_page_links_to_its_replays(
    prompt_editor_client: Client,
) -> None:
    override = draft()

    page = prompt_editor_client.get(
        reverse("admin:prompts_admin_promptoverride_change", args=[override.pk])
    ).content.decode()
    runs = prompt_editor_client.get(
        reverse("admin:governance_replayrun_changelist") + f"?override__id__exact={override.pk}"
    )

    assert f'href="{start_url(override)}"' in page
    assert "Testar o rascunho em conversas gravadas" in page
    assert "Testes deste rascunho em conversas gravadas" in page
    assert runs.status_code == 200


def test_the_changelist_lists_the_runs_of_one_override(
    prompt_editor_client: Client,
) -> None:
    mine, other = draft(), draft(content=DRAFT_TEXT + " outro")
    run = queued_run(mine, calls_selected=3, calls_done=1)
    queued_run(other)

    response = prompt_editor_client.get(
        reverse("admin:governance_replayrun_changelist") + f"?override__id__exact={mine.pk}"
    )

    assert [r.pk for r in response.context["cl"].result_list] == [run.pk]
    assert "1/3" in response.content.decode()


def test_a_result_of_a_deleted_call_stays_readable(
    prompt_editor_client: Client, instance: Instance
) -> None:
    run = queued_run(draft(), status=ReplayStatus.DONE)
    session = conversation(instance)
    call = baker.make(LLMCall, session=session, agent="triagem", purpose="agent", outcome="ok")
    result(run, session, llm_call=call)
    session.delete()

    response = prompt_editor_client.get(run_url(run))

    assert response.status_code == 200
    assert ReplayResult.objects.get().llm_call_id is None


def test_a_start_with_a_date_past_the_last_one_taken_is_refused(
    prompt_editor_client: Client,
) -> None:
    override = draft()
    start = reverse("admin:governance_replayrun_start")

    at_limit = prompt_editor_client.get(
        start, {"override": str(override.pk), "count": "1", "date_to": "9998-12-31"}
    )
    past = prompt_editor_client.get(
        start, {"override": str(override.pk), "count": "1", "date_to": "9999-12-31"}
    )
    started = prompt_editor_client.post(start, {"override": override.pk, "date_to": "9999-12-31"})

    assert (at_limit.status_code, at_limit.context["form"].errors) == (200, {})
    refused = {"date_to": ["Certifique-se que este valor seja menor ou igual a 9998-12-31."]}
    assert (past.status_code, past.context["form"].errors) == (200, refused)
    assert (started.status_code, started.context["form"].errors) == (200, refused)
    assert ReplayRun.objects.count() == 0
