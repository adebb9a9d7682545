"""Simulated customers in the admin: who may see and start them (prompt editors may, Support may
not), the start form's one-time token (a second submit starts no second run), the transcript
masked without the permission to view personal data, and the pages' queries, the same for 1
and 5 results.

Nothing here plays a conversation: a start's task is enqueued after the commit, which these
tests capture without running (tests/simulator/test_personas.py plays them)."""

import re
import threading
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.urls import reverse
from model_bakery import baker
from pytest_django import Settings

from conversations.models import Instance, Session
from governance.models import (
    Persona,
    PersonaGoal,
    PersonaOutcome,
    PersonaResult,
    PersonaRun,
    ReplayStatus,
)
from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride, Release
from simulator.personas import persona_run_submit
from tests.helpers.recorded_calls import conversation, draft
from tests.helpers.staff import logged_in, staff_member
from tests.simulator import personas_script as script

pytestmark = pytest.mark.django_db

START = "/admin/governance/personarun/start/"
PERSONAS = "/admin/governance/persona/"
RUNS = "/admin/governance/personarun/"
CUSTOMER = "Maria Souza"


@pytest.fixture(autouse=True)
def priced_models(settings: Settings) -> None:
    """Every model a run may call has a listed price, so a start is not refused for it."""
    for name, model in script.MODEL_SETTINGS.items():
        setattr(settings, name, model)


def persona(title: str = "Produtor rural", **fields: Any) -> Persona:
    values: dict[str, Any] = {
        "title": title,
        "description": "Produtor rural com poço, quer orçamento.",
        "goal": PersonaGoal.LEAD,
        **fields,
    }
    row: Persona = Persona.objects.create(**values)
    return row


def finished_run(override: PromptOverride | None = None, **fields: Any) -> PersonaRun:
    values: dict[str, Any] = {
        "override": override,
        "agent": override.agent if override is not None else "",
        "status": ReplayStatus.DONE,
        **fields,
    }
    run: PersonaRun = PersonaRun.objects.create(**values)
    return run


def played(run: PersonaRun, session: Session | None = None, **fields: Any) -> PersonaResult:
    values: dict[str, Any] = {
        "persona": persona(f"Cliente {PersonaResult.objects.count() + 1}"),
        "title": "Produtor rural",
        "session": session,
        "reached": True,
        "outcome": PersonaOutcome.LEAD,
        "turns": 2,
        "cost_usd": Decimal("0.000123"),
        "transcript": [
            {"who": "customer", "text": "Oi, quero um orçamento", "code": None, "agent": ""},
            {
                "who": "bot",
                "text": "Qual o seu nome, CPF e e-mail?",
                "code": 1,
                "agent": "coleta",
                "options": ["Confirmar", "Corrigir"],
            },
            {
                "who": "customer",
                "text": f"{CUSTOMER}, CPF 529.982.247-25, maria@example.com",
                "tap": False,
            },
        ],
        **fields,
    }
    row: PersonaResult = PersonaResult.objects.create(run=run, **values)
    return row


def run_url(run: PersonaRun, view: str = "change") -> str:
    return reverse(f"admin:governance_personarun_{view}", args=[run.pk])


def result_url(result: PersonaResult) -> str:
    return reverse("admin:governance_personaresult_change", args=[result.pk])


def form_token(client: Client, url: str = START) -> str:
    """The one-time token the start page renders in its form."""
    token: str = client.get(url).context["form_token"]
    return token


# --- Permissions --------------------------------------------------------------------------------


def test_support_may_not_see_or_start_simulated_customers(
    support_client: Client, instance: Instance
) -> None:
    person = persona()
    run = finished_run()
    result = played(run)

    responses = [
        support_client.get(PERSONAS).status_code,
        support_client.get(START).status_code,
        support_client.post(START, {"personas": [person.pk], "form_token": "x"}).status_code,
        support_client.get(RUNS).status_code,
        support_client.get(run_url(run)).status_code,
        support_client.get(run_url(run, "progress")).status_code,
        support_client.get(result_url(result)).status_code,
    ]

    assert responses == [403, 403, 403, 403, 403, 403, 403]
    assert PersonaRun.objects.count() == 1


def test_staff_without_the_persona_permissions_may_not_see_or_start_them(
    instance: Instance,
) -> None:
    client = logged_in(staff_member())
    person = persona()
    run = finished_run()
    result = played(run)

    responses = [
        client.get(PERSONAS).status_code,
        client.get(START).status_code,
        client.post(START, {"personas": [person.pk]}).status_code,
        client.get(run_url(run)).status_code,
        client.get(result_url(result)).status_code,
    ]

    assert responses == [403, 403, 403, 403, 403]
    assert PersonaRun.objects.count() == 1


def test_a_logged_out_visitor_is_sent_to_the_login_page() -> None:
    response = Client().get(START)

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/governance/personarun/start/"


def test_a_reader_of_runs_may_read_them_but_not_start_one(instance: Instance) -> None:
    reader = logged_in(
        staff_member(permissions=("governance.view_personarun", "governance.view_personaresult"))
    )
    run = finished_run()
    result = played(run)

    assert reader.get(run_url(run)).status_code == 200
    assert reader.get(result_url(result)).status_code == 200
    assert reader.get(START).status_code == 403
    assert 'id="simulate-customers"' not in reader.get(RUNS).content.decode()


def test_a_prompt_editor_sees_the_list_with_its_buttons_and_the_start_page(
    prompt_editor_client: Client, instance: Instance
) -> None:
    persona("Produtor rural")
    persona("Cliente apressado", is_active=False)

    listing = prompt_editor_client.get(PERSONAS)
    start = prompt_editor_client.get(START)

    assert listing.status_code == 200
    assert f'<a href="{START}" id="simulate-customers">Simular clientes</a>' in (
        listing.content.decode()
    )
    assert f'<a href="{RUNS}" id="persona-runs">' in listing.content.decode()
    assert start.status_code == 200
    # The active personas come ticked, the inactive one offered unticked.
    assert [str(p) for p in start.context["form"].fields["personas"].queryset] == [
        "Produtor rural",
        "Cliente apressado",
    ]
    assert start.context["form"].initial["personas"] == [Persona.objects.get(is_active=True).pk]


def test_runs_and_results_are_never_added_edited_or_deleted_as_rows(
    prompt_editor_client: Client, admin_client: Client
) -> None:
    run = finished_run()
    result = played(run)

    responses = [
        admin_client.get(f"{RUNS}add/").status_code,
        admin_client.post(run_url(run), {}).status_code,
        admin_client.post(run_url(run, "delete"), {"post": "yes"}).status_code,
        admin_client.get("/admin/governance/personaresult/add/").status_code,
        admin_client.post(result_url(result), {}).status_code,
    ]

    assert responses == [403, 403, 403, 403, 403]
    assert (PersonaRun.objects.count(), PersonaResult.objects.count()) == (1, 1)


@pytest.mark.parametrize("value", ["abc", "²", "-1"])
def test_a_start_against_a_malformed_override_id_is_not_found(
    prompt_editor_client: Client, value: str
) -> None:
    assert prompt_editor_client.get(f"{START}?override={value}").status_code == 404


def test_a_missing_run_or_result_is_not_found(prompt_editor_client: Client) -> None:
    assert prompt_editor_client.get(f"{RUNS}999/change/").status_code == 404
    assert prompt_editor_client.get(f"{RUNS}999/progress/").status_code == 404
    assert (
        prompt_editor_client.get("/admin/governance/personaresult/999/change/").status_code == 404
    )
    assert prompt_editor_client.get("/admin/governance/personaresult/x/change/").status_code == 404
    assert prompt_editor_client.get("/admin/governance/personaresult/²/change/").status_code == 404


def test_a_start_with_an_empty_override_plays_against_the_prompts_in_use(
    prompt_editor_client: Client,
) -> None:
    response = prompt_editor_client.get(f"{START}?override=")

    assert response.status_code == 200
    assert response.context["override"] is None
    assert response.context["target"] == (
        "os prompts em uso (o prompt personalizado ativo de cada agente, ou o prompt padrão)"
    )


def test_a_start_against_a_missing_override_is_not_found(prompt_editor_client: Client) -> None:
    assert prompt_editor_client.get(f"{START}?override=999").status_code == 404


@pytest.mark.parametrize("value", ["abc", "²", "-1", "999"])
def test_a_start_against_a_malformed_or_missing_release_is_not_found(
    prompt_editor_client: Client, value: str
) -> None:
    assert prompt_editor_client.get(f"{START}?release={value}").status_code == 404


def test_a_start_against_a_draft_and_a_release_at_once_is_refused(
    prompt_editor_client: Client, instance: Instance
) -> None:
    override = draft("coleta", script.GOOD_DRAFT)
    release = Release.objects.create(name="Março", prompts={}, packages={})
    url = f"{START}?override={override.pk}&release={release.pk}"

    response = prompt_editor_client.get(url)
    posted = prompt_editor_client.post(
        START,
        {
            "override": override.pk,
            "release": release.pk,
            "personas": [persona().pk],
            "form_token": str(uuid4()),
        },
    )

    assert (response.status_code, posted.status_code) == (400, 400)
    assert response.content.decode() == "Escolha um rascunho ou um lançamento, não os dois."
    assert PersonaRun.objects.count() == 0


def test_a_start_against_a_release_pins_its_prompt_and_package_versions(
    prompt_editor_client: Client, instance: Instance, django_capture_on_commit_callbacks: Any
) -> None:
    person = persona()
    collection = draft("coleta", script.GOOD_DRAFT)
    package = KBPackage.objects.create(
        package_id="POTABILIDADE", title="Potabilidade", description="Água", content="v1"
    )
    first = package.history.latest().history_id
    package.content = "v2"
    package.save()
    release = Release.objects.create(
        name="Março",
        prompts={"coleta": collection.history.latest().history_id},
        packages={"POTABILIDADE": first},
    )
    url = f"{START}?release={release.pk}"
    page = prompt_editor_client.get(url)

    with django_capture_on_commit_callbacks() as enqueued:
        response = prompt_editor_client.post(
            url,
            {
                "release": release.pk,
                "personas": [person.pk],
                "form_token": form_token(prompt_editor_client, url),
            },
        )

    run = PersonaRun.objects.get()
    assert page.context["target"] == (
        f"as versões dos prompts e do conhecimento do lançamento #{release.pk} Março"
    )
    assert (
        f'<a href="/admin/prompts_admin/release/{release.pk}/change/">#{release.pk} Março</a>'
    ) in page.content.decode()
    assert response["Location"] == f"/admin/governance/personarun/{run.pk}/change/"
    assert (run.release, run.override, len(enqueued)) == (release, None, 1)
    assert run.prompt_versions == {
        "triagem": "builtin",
        "qualificacao": "builtin",
        "coleta": f"override:{collection.history.latest().history_id}",
    }
    assert run.package_versions == {"POTABILIDADE": first}


# --- Start: one run per form ----------------------------------------------------------------------


def test_a_start_stores_one_queued_run_and_redirects_to_it(
    prompt_editor_client: Client,
    prompt_editor_user: User,
    instance: Instance,
    django_capture_on_commit_callbacks: Any,
) -> None:
    person = persona()
    override = draft("coleta", script.GOOD_DRAFT)
    url = f"{START}?override={override.pk}"
    token = form_token(prompt_editor_client, url)

    with django_capture_on_commit_callbacks() as enqueued:
        response = prompt_editor_client.post(
            url, {"override": override.pk, "personas": [person.pk], "form_token": token}
        )

    run = PersonaRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/admin/governance/personarun/{run.pk}/change/"
    assert (run.status, run.override_id, run.persona_ids, run.created_by) == (
        ReplayStatus.QUEUED,
        override.pk,
        [person.pk],
        prompt_editor_user,
    )
    assert run.task_id == token
    assert len(enqueued) == 1
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Teste com clientes simulados iniciado."
    ]


def test_a_second_submit_of_the_same_form_starts_no_second_run(
    prompt_editor_client: Client, instance: Instance, django_capture_on_commit_callbacks: Any
) -> None:
    person = persona()
    data = {"personas": [person.pk], "form_token": form_token(prompt_editor_client)}

    with django_capture_on_commit_callbacks() as enqueued:
        first = prompt_editor_client.post(START, data)
        second = prompt_editor_client.post(START, data)

    run = PersonaRun.objects.get()
    assert (
        first["Location"] == second["Location"] == f"/admin/governance/personarun/{run.pk}/change/"
    )
    assert len(enqueued) == 1
    assert [str(m) for m in get_messages(second.wsgi_request)] == [
        "Teste com clientes simulados iniciado.",
        "Este teste com clientes simulados já foi iniciado.",
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_form_submitted_twice_at_once_starts_one_run(instance: Instance) -> None:
    """Two requests of one double click, each in a thread with its own connection: the
    starter's row lock makes the second look the token up after the first committed."""
    user = staff_member()
    person = persona()
    token = uuid4()
    barrier = threading.Barrier(2)
    created: list[bool] = []

    def submit() -> None:
        try:
            barrier.wait()
            _run, new = persona_run_submit(
                override=None, persona_ids=[person.pk], user=user, form_token=token
            )
            created.append(new)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(created) == [False, True]
    assert list(PersonaRun.objects.values_list("task_id", flat=True)) == [str(token)]


def test_two_forms_start_two_runs(
    prompt_editor_client: Client, instance: Instance, django_capture_on_commit_callbacks: Any
) -> None:
    person = persona()

    with django_capture_on_commit_callbacks() as enqueued:
        for _ in range(2):
            token = form_token(prompt_editor_client)
            prompt_editor_client.post(START, {"personas": [person.pk], "form_token": token})

    assert PersonaRun.objects.count() == 2
    assert len(enqueued) == 2


@pytest.mark.parametrize("token", [None, "", "not-a-token"])
def test_a_submit_without_a_valid_token_starts_nothing(
    prompt_editor_client: Client, instance: Instance, token: str | None
) -> None:
    person = persona()
    data: dict[str, Any] = {"personas": [person.pk]}
    if token is not None:
        data["form_token"] = token

    response = prompt_editor_client.post(START, data)

    assert response.status_code == 200
    assert PersonaRun.objects.count() == 0
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Este formulário expirou. Recarregue a página e tente de novo."
    ]


def test_a_refused_start_shows_the_page_again_with_the_reason(
    prompt_editor_client: Client, settings: Settings, instance: Instance
) -> None:
    person = persona()
    settings.OPENAI_MODEL_PERSONA = "modelo-sem-preco"
    data = {"personas": [person.pk], "form_token": form_token(prompt_editor_client)}

    response = prompt_editor_client.post(START, data)

    assert response.status_code == 200
    assert PersonaRun.objects.count() == 0
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Sem preço para o modelo modelo-sem-preco (conversations/model_prices.py): o teste não "
        "conseguiria respeitar REPLAY_MAX_COST_USD."
    ]


def test_a_start_with_no_persona_chosen_is_a_form_error(
    prompt_editor_client: Client, instance: Instance
) -> None:
    persona()

    response = prompt_editor_client.post(START, {"form_token": form_token(prompt_editor_client)})

    assert response.status_code == 200
    assert response.context["form"].errors == {"personas": ["Este campo é obrigatório."]}
    assert PersonaRun.objects.count() == 0


# --- Masking ------------------------------------------------------------------------------------


def test_the_transcript_is_masked_for_staff_without_personal_data(
    prompt_editor_client: Client, admin_client: Client, instance: Instance
) -> None:
    session = conversation(instance, customer_name=CUSTOMER)
    result = played(finished_run(), session)

    masked = prompt_editor_client.get(result_url(result))
    clear = admin_client.get(result_url(result))

    assert [b.text for b in masked.context["bubbles"]] == [
        "Oi, quero um orçamento",
        "Qual o seu nome, CPF e e-mail?",
        "M*** S***, CPF ***.***.***-**, ***@***",
    ]
    assert CUSTOMER not in masked.content.decode()
    assert "Os dados do cliente estão mascarados" in masked.content.decode()
    assert [b.text for b in clear.context["bubbles"]][2] == (
        f"{CUSTOMER}, CPF 529.982.247-25, maria@example.com"
    )
    assert "Os dados do cliente estão mascarados" not in clear.content.decode()


def test_a_transcript_whose_conversation_was_deleted_is_masked_by_pattern(
    prompt_editor_client: Client, instance: Instance
) -> None:
    session = conversation(instance, customer_name=CUSTOMER)
    result = played(finished_run(), session)
    session.delete()

    response = prompt_editor_client.get(result_url(result))

    assert response.status_code == 200
    assert [b.text for b in response.context["bubbles"]][2] == (
        f"{CUSTOMER}, CPF ***.***.***-**, ***@***"
    )


# --- Pages and their queries --------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 5])
def test_the_personas_list_queries_do_not_grow_with_the_personas(
    prompt_editor_client: Client, django_assert_num_queries: Any, count: int
) -> None:
    for n in range(count):
        persona(f"Cliente {n}")

    # Session, user, permissions (the user's, the group's), the count, the filtered count, the
    # page's rows.
    with django_assert_num_queries(7):
        response = prompt_editor_client.get(PERSONAS)

    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == count


@pytest.mark.parametrize("count", [1, 5])
def test_the_runs_list_queries_do_not_grow_with_the_runs(
    prompt_editor_client: Client, django_assert_num_queries: Any, count: int
) -> None:
    override = draft("coleta", script.GOOD_DRAFT)
    for _ in range(count):
        finished_run(override, created_by=baker.make(User), personas_selected=2, personas_done=1)

    # Session, user, permissions (the user's, the group's), the override filter's choices, the
    # count, the filtered count, the rows with their override and starter.
    with django_assert_num_queries(8):
        response = prompt_editor_client.get(RUNS)

    assert response.status_code == 200
    assert len(response.context["cl"].result_list) == count
    assert "1/2" in response.content.decode()


@pytest.mark.parametrize("count", [1, 5])
def test_the_report_queries_do_not_grow_with_the_results(
    prompt_editor_client: Client,
    django_assert_num_queries: Any,
    instance: Instance,
    count: int,
) -> None:
    override = draft("coleta", script.GOOD_DRAFT)
    run = finished_run(override, created_by=baker.make(User), personas_selected=count)
    for n in range(count):
        played(run, conversation(instance), reached=n % 2 == 0)

    # Session, user, permissions (the user's, the group's), the run with its override and
    # starter, its results.
    with django_assert_num_queries(6):
        response = prompt_editor_client.get(run_url(run))

    assert response.status_code == 200
    assert len(response.context["results"]) == count
    links = re.findall(
        r'href="/admin/governance/personaresult/\d+/change/"', response.content.decode()
    )
    assert len(links) == count


def test_the_report_shows_the_totals_and_each_outcome(
    prompt_editor_client: Client, instance: Instance
) -> None:
    override = draft("coleta", script.GOOD_DRAFT)
    run = finished_run(
        override, personas_selected=2, personas_done=2, reached=1, failed=1, cost_usd="0.0042"
    )
    played(run, title="Produtor rural")
    missed = played(
        run,
        title="Cliente irritado",
        reached=False,
        outcome=PersonaOutcome.HANDOFF,
        handoff_reason="customer_requested",
        differences=["esperado: pedido confirmado; terminou em: transferência"],
    )

    page = prompt_editor_client.get(run_url(run)).content.decode()

    assert '<span id="replay-status">concluído</span>' in page
    assert '<span id="replay-done">2</span>/<span id="replay-selected">2</span>' in page
    assert '<td id="total-reached">1</td>' in page
    assert '<td id="total-failed">1</td>' in page
    assert '<td id="total-cost">0,004200</td>' in page
    assert (
        f'<a href="/admin/governance/personaresult/{missed.pk}/change/">Cliente irritado</a>'
        in page
    )
    assert "esperado: pedido confirmado; terminou em: transferência" in page
    assert (
        f">o prompt personalizado #{override.pk} do agente coleta, fixado em todas as conversas</a>"
    ) in page


def test_a_run_of_a_release_names_and_links_its_release(prompt_editor_client: Client) -> None:
    release = Release.objects.create(name="Março", prompts={}, packages={})
    run = finished_run(release=release)

    page = prompt_editor_client.get(run_url(run)).content.decode()

    assert (
        f'<td id="persona-target"><a href="/admin/prompts_admin/release/{release.pk}/change/">'
        f"as versões dos prompts e do conhecimento do lançamento #{release.pk} Março</a></td>"
    ) in page


def test_the_progress_is_json_in_the_replay_pages_keys(
    prompt_editor_client: Client,
) -> None:
    run = finished_run(status=ReplayStatus.RUNNING, personas_selected=3, personas_done=1, reached=1)

    response = prompt_editor_client.get(run_url(run, "progress"))

    assert response.json() == {
        "status": "running",
        "status_label": "em andamento",
        "finished": False,
        "done": 1,
        "selected": 3,
        "detail": "",
        "cost_usd": "0.000000",
        "reached": 1,
        "failed": 0,
    }


@pytest.mark.parametrize("count", [1, 5])
def test_the_transcript_queries_do_not_grow_with_the_messages(
    prompt_editor_client: Client,
    django_assert_num_queries: Any,
    instance: Instance,
    count: int,
) -> None:
    bubble = {"who": "customer", "text": f"Sou {CUSTOMER}", "code": None, "agent": ""}
    session = conversation(instance, customer_name=CUSTOMER)
    result = played(finished_run(), session, transcript=[bubble] * count)

    # Session, user, permissions (the user's, the group's), the result with its run and its
    # conversation (the masker's known values come from the conversation's row).
    with django_assert_num_queries(5):
        response = prompt_editor_client.get(result_url(result))

    assert response.status_code == 200
    assert [b.text for b in response.context["bubbles"]] == ["Sou M*** S***"] * count


# --- The persona's page: what a careless or hostile POST gets -----------------------------------

PERSONA_ADD = f"{PERSONAS}add/"


def persona_form(**fields: str) -> dict[str, str]:
    return {
        "title": "Produtor rural",
        "description": "Produtor rural com poço, quer orçamento.",
        "goal": "lead",
        "expected_segment": "",
        "expected_service": "",
        "required_fields": "",
        "expected_handoff_reason": "",
        "max_turns": "12",
        "is_active": "on",
        "change_reason": "Novo cliente simulado",
        **fields,
    }


def persona_errors(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200
    errors: dict[str, list[str]] = response.context["adminform"].form.errors
    return errors


@pytest.mark.parametrize("turns", ["1", "30"])
def test_a_persona_keeps_a_message_limit_of_1_to_30(
    prompt_editor_client: Client, turns: str
) -> None:
    response = prompt_editor_client.post(PERSONA_ADD, persona_form(max_turns=turns))

    assert response.status_code == 302
    assert list(Persona.objects.values_list("max_turns", flat=True)) == [int(turns)]


@pytest.mark.parametrize(
    ("turns", "error"),
    [
        ("0", "Certifique-se que este valor seja maior ou igual a 1."),
        ("-1", "Certifique-se que este valor seja maior ou igual a 1."),
        ("31", "Certifique-se que este valor seja menor ou igual a 30."),
        ("99999999999999999999", "Certifique-se que este valor seja menor ou igual a 30."),
        ("12.5", "Informe um número inteiro."),
        ("doze", "Informe um número inteiro."),
    ],
)
def test_a_message_limit_outside_1_to_30_is_refused_and_nothing_is_saved(
    prompt_editor_client: Client, turns: str, error: str
) -> None:
    response = prompt_editor_client.post(PERSONA_ADD, persona_form(max_turns=turns))

    assert persona_errors(response) == {"max_turns": [error]}
    assert Persona.objects.count() == 0


def test_a_null_character_in_the_required_fields_is_refused_and_nothing_is_lost(
    prompt_editor_client: Client,
) -> None:
    person = persona(required_fields=["cadastro.email"])
    page = f"{PERSONAS}{person.pk}/change/"

    response = prompt_editor_client.post(
        page, persona_form(required_fields="cadastro.email\ncadastro.\x00documento")
    )

    assert persona_errors(response) == {"required_fields": ["Caracteres nulos não são permitidos."]}
    person.refresh_from_db()
    assert (person.required_fields, person.history.count()) == (["cadastro.email"], 1)


def test_garbage_lines_in_the_required_fields_are_kept_as_typed(
    prompt_editor_client: Client,
) -> None:
    response = prompt_editor_client.post(
        PERSONA_ADD,
        persona_form(required_fields="  cadastro.email \r\n\r\n<script>x</script>\n{}\n"),
    )

    assert response.status_code == 302
    assert Persona.objects.get().required_fields == ["cadastro.email", "<script>x</script>", "{}"]


def test_a_missing_or_malformed_persona_goes_back_to_the_list_with_a_message(
    prompt_editor_client: Client,
) -> None:
    for object_id in ("999", "abc", "99999999999999999999"):
        response = prompt_editor_client.get(f"{PERSONAS}{object_id}/change/", follow=True)

        assert response.redirect_chain == [("/admin/", 302)]
        assert [str(m) for m in get_messages(response.wsgi_request)] == [
            f"O cliente simulado com ID “{object_id}” não existe. Talvez tenha sido removido."
        ]


def test_a_start_with_a_persona_id_that_is_not_one_is_a_form_error(
    prompt_editor_client: Client,
) -> None:
    person = persona()
    token = form_token(prompt_editor_client)

    responses = {
        value: prompt_editor_client.post(START, {"personas": [value], "form_token": token})
        for value in (
            "999",
            "abc",
            "\x00",
            # The largest id a 64-bit column holds, and past it (SQLite cannot bind that one).
            "9223372036854775807",
            "9223372036854775808",
            "9" * 20,
        )
    }
    invalid = "Faça uma escolha válida. %s não é uma das escolhas disponíveis."

    assert {value: r.context["form"].errors for value, r in responses.items()} == {
        "999": {"personas": ["Faça uma escolha válida. 999 não é uma das escolhas disponíveis."]},
        "abc": {"personas": ["“abc” não é um valor válido."]},
        "\x00": {"personas": ["Caracteres nulos não são permitidos."]},
        "9223372036854775807": {"personas": [invalid % "9223372036854775807"]},
        "9223372036854775808": {"personas": [invalid % "9223372036854775808"]},
        "99999999999999999999": {"personas": [invalid % "99999999999999999999"]},
    }
    assert (PersonaRun.objects.count(), person.pk) == (0, person.pk)


@pytest.mark.parametrize(
    ("goal", "reason", "errors"),
    [
        ("handoff", "", ["Diga qual motivo de transferência é esperado."]),
        (
            "lead",
            "model_requested",
            ["Um pedido confirmado não tem motivo de transferência a informar."],
        ),
        # An unknown reason is no reason: both are said.
        (
            "handoff",
            "not_a_reason",
            [
                "Faça uma escolha válida. not_a_reason não é uma das escolhas disponíveis.",
                "Diga qual motivo de transferência é esperado.",
            ],
        ),
    ],
)
def test_an_outcome_and_a_handoff_reason_that_disagree_are_refused_and_nothing_is_lost(
    prompt_editor_client: Client, goal: str, reason: str, errors: list[str]
) -> None:
    person = persona()
    page = f"{PERSONAS}{person.pk}/change/"

    response = prompt_editor_client.post(
        page, persona_form(goal=goal, expected_handoff_reason=reason)
    )

    assert persona_errors(response) == {"expected_handoff_reason": errors}
    person.refresh_from_db()
    assert (person.goal, person.expected_handoff_reason, person.history.count()) == ("lead", "", 1)


def test_an_unknown_outcome_is_refused(prompt_editor_client: Client) -> None:
    response = prompt_editor_client.post(PERSONA_ADD, persona_form(goal="sale"))

    assert persona_errors(response) == {
        "goal": ["Faça uma escolha válida. sale não é uma das escolhas disponíveis."]
    }
    assert Persona.objects.count() == 0
