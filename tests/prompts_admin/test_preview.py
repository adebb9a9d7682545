"""The PromptOverride admin tools: the final-prompt preview and "start from the built-in prompt"."""

import time
from datetime import timedelta

import pytest
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.test import Client
from django.utils import timezone
from model_bakery import baker

from agents.invoker import PreparedCall
from agents.prompts import builtin_template
from agents.prompts.variables import variable_names
from agents.states import AgentName, SessionState
from conversations.models import Direction, Instance, LLMCall, Message, Session
from knowledge_base.models import Intent, KBPackage, Segment, Service
from prompts_admin.models import PromptOverride
from tests.helpers.fake_collaborators import TEMPLATE_ATTACKS
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db
BASE = "/admin/prompts_admin/promptoverride/"
GUARDS = "# Regras fixas (valem acima de qualquer instrução anterior)"
METADATA = "# Empresa e catálogo (gerado pelo sistema)"
CONTEXT = "# Contexto desta conversa (gerado pelo sistema)"


@pytest.fixture
def catalog() -> None:
    segment = Segment.objects.create(code="HUMANO", label="Saúde humana", health_sensitive=True)
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(
        code="TOXICOLOGICO",
        label="Exame toxicológico",
        segment=segment,
        parameter_schema=[{"name": "finalidade", "label": "Finalidade", "required": True}],
    )
    KBPackage.objects.create(
        package_id="PREPARO", title="Preparo", description="Preparo de exames", content="Jejum"
    )


def final_prompt(response: HttpResponseBase) -> str:
    assert isinstance(response, TemplateResponse)
    assert response.context_data is not None
    prepared: PreparedCall = response.context_data["prepared"]
    return prepared.instructions


def conversation_context(response: HttpResponseBase) -> str:
    assert isinstance(response, TemplateResponse)
    assert response.context_data is not None
    prepared: PreparedCall = response.context_data["prepared"]
    return prepared.context


def test_preview_of_an_override_shows_it_rendered_with_metadata_and_guards_appended(
    admin_client: Client, catalog: None
) -> None:
    override = PromptOverride.objects.create(
        agent="qualificacao",
        content="Sou {{ agent_name }}; prometa resposta em 5 minutos.",
        is_active=False,
    )

    response = admin_client.get(f"{BASE}{override.pk}/preview/")

    assert response.status_code == 200
    prompt = final_prompt(response)
    context = conversation_context(response)
    assert prompt.startswith("Sou Lia; prometa resposta em 5 minutos.\n\n" + METADATA)
    assert prompt.index(METADATA) < prompt.index(GUARDS)
    # The synthetic sample takes the active catalog: a health segment → health limits.
    assert context.startswith(CONTEXT)
    assert "segmento: HUMANO — Saúde humana;" in context
    assert "## Serviços ativos do segmento\n- TOXICOLOGICO: Exame toxicológico" in (
        response.context["prepared"].reference
    )
    assert '<pre id="conversation-reference"># Referência desta conversa' in (
        response.content.decode()
    )
    assert "Limites de saúde" in context
    assert "Nunca prometa prazo, data ou horário" in prompt
    assert prompt.rstrip().endswith("estas regras ao cliente.")
    html = response.content.decode()
    assert '<pre id="conversation-context"># Contexto desta conversa' in html
    # The text uses no per-call variable: all of the instructions are cacheable.
    assert (
        f'<td id="cache-share">{len(prompt)} de {len(prompt)} caracteres das instruções (100%)</td>'
    ) in html
    assert 'id="cache-breakers"' not in html
    assert response.context["prepared"].prompt_version == "preview"
    assert response.context["prepared"].messages == ()
    html = response.content.decode()
    assert "Prévia do prompt final" in html
    assert "Sou Lia; prometa resposta em 5 minutos." in html
    # A preview never calls the model nor records a call.
    assert LLMCall.objects.count() == 0


@pytest.mark.parametrize("attack", TEMPLATE_ATTACKS)
def test_preview_of_a_stored_attack_shows_the_builtin_prompt_quickly(
    admin_client: Client, catalog: None, attack: str
) -> None:
    override = PromptOverride.objects.create(
        agent="triagem", content=TEMPLATE_ATTACKS[attack][0], is_active=False
    )
    # Not timed: the process's first admin page loads its templates and URLs (about a second
    # under load), which is not what the attack costs.
    warm_up = PromptOverride.objects.create(agent="triagem", content="Olá.", is_active=False)
    assert admin_client.get(f"{BASE}{warm_up.pk}/preview/").status_code == 200

    started = time.perf_counter()
    response = admin_client.get(f"{BASE}{override.pk}/preview/")
    elapsed = time.perf_counter() - started

    assert response.status_code == 200
    assert response.context["prepared"].prompt_version == "builtin"
    assert final_prompt(response).startswith("Você é Lia, assistente virtual")
    assert elapsed < 1.0


def test_preview_with_a_real_session_includes_its_history_and_data(
    admin_client: Client, catalog: None
) -> None:
    instance = baker.make(Instance, name="GoYou Saúde", health_sensitive=True)
    session = baker.make(
        Session,
        instance=instance,
        state=SessionState.DATA_COLLECT,
        customer_phone="5511912345678",
        customer_name="Joana",
        segment="HUMANO",
        intent="ORCAMENTO",
        service="TOXICOLOGICO",
        registration_data={"nome": "Joana Lima"},
        last_message_at=timezone.now(),
    )
    start = timezone.now() - timedelta(minutes=5)
    baker.make(
        Message, session=session, direction=Direction.INBOUND, content="Oi", created_at=start
    )
    baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá, Joana!",
        created_at=start + timedelta(seconds=1),
    )
    override = PromptOverride.objects.create(
        agent="coleta", content="Coleta de {{ customer_phone }}"
    )

    response = admin_client.get(f"{BASE}{override.pk}/preview/?session={session.pk}")

    assert response.status_code == 200
    prompt = final_prompt(response)
    assert prompt.startswith("Coleta de +55 11 91234-5678")
    assert "Dados já coletados:\n- nome: Joana Lima" in conversation_context(response)
    assert [(m.role, m.content) for m in response.context["prepared"].messages] == [
        ("user", "Oi"),
        ("assistant", "Olá, Joana!"),
    ]
    assert response.context["preview"].stage_changed is False
    assert f'<option value="{session.pk}" selected>' in response.content.decode()


def test_a_session_at_another_stage_is_previewed_at_the_agents_first_stage(
    admin_client: Client, catalog: None
) -> None:
    session = baker.make(Session, state=SessionState.TRIAGE, last_message_at=timezone.now())
    override = PromptOverride.objects.create(agent="coleta", content="Coleta")

    response = admin_client.get(f"{BASE}{override.pk}/preview/?session={session.pk}")

    assert response.context["preview"].stage_changed is True
    assert "\n- Etapa atual: coleta de dados.\n" in conversation_context(response)
    assert "Esta conversa está em outra etapa" in response.content.decode()


def test_staff_who_cannot_read_conversations_only_get_the_synthetic_sample(
    catalog: None,
) -> None:
    client = logged_in(
        staff_member(
            permissions=("prompts_admin.view_promptoverride", "prompts_admin.change_promptoverride")
        )
    )
    session = baker.make(
        Session, state=SessionState.TRIAGE, customer_name="Segredo", last_message_at=timezone.now()
    )
    override = PromptOverride.objects.create(agent="triagem", content="Oi")

    response = client.get(f"{BASE}{override.pk}/preview/?session={session.pk}")

    assert response.status_code == 200
    assert response.context["sessions"] == []
    assert "Segredo" not in final_prompt(response) + conversation_context(response)
    assert "Cliente Exemplo" in conversation_context(response)


def test_preview_needs_a_permission_on_overrides() -> None:
    client = logged_in(staff_member())
    override = PromptOverride.objects.create(agent="triagem", content="Oi")

    assert client.get(f"{BASE}{override.pk}/preview/").status_code == 403
    assert client.get(f"{BASE}preview/triagem/").status_code == 403


@pytest.mark.parametrize("agent", ["triagem", "qualificacao", "coleta"])
def test_agent_preview_shows_the_builtin_prompt_without_an_active_override(
    admin_client: Client, catalog: None, agent: str
) -> None:
    response = admin_client.get(f"{BASE}preview/{agent}/")

    assert response.status_code == 200
    assert response.context["prepared"].prompt_version == "builtin"
    assert final_prompt(response).startswith("Você é Lia, assistente virtual da empresa")


def test_agent_preview_shows_the_active_override(admin_client: Client, catalog: None) -> None:
    PromptOverride.objects.create(
        agent="triagem", content="Ativo: {{ company_name }}", is_active=True
    )

    response = admin_client.get(f"{BASE}preview/triagem/")

    assert final_prompt(response).startswith("Ativo: Laboratório Exemplo\n\n")
    assert response.context["prepared"].prompt_version.startswith("override:")


# --- The facts table speaks the editor's words, never the stored values ------------------------


@pytest.mark.parametrize(
    ("agent", "stage"),
    [("triagem", "Triagem"), ("qualificacao", "Qualificação"), ("coleta", "Coleta de dados")],
)
def test_the_agent_preview_names_the_agent_the_stage_and_the_default_prompt(
    admin_client: Client, catalog: None, agent: str, stage: str
) -> None:
    page = admin_client.get(f"{BASE}preview/{agent}/").content.decode()

    assert f'<tr><th>Etapa</th><td id="stage">{stage}</td></tr>' in page
    assert '<tr><th>Versão do prompt</th><td id="prompt-version">prompt padrão</td></tr>' in page
    assert "<h2>Prompt de sistema (as instruções)</h2>" in page
    assert "TRIAGE" not in page
    assert "builtin" not in page


def test_the_agent_preview_of_an_active_custom_prompt_names_it_and_its_version(
    admin_client: Client, catalog: None
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Ativo", is_active=True)
    version = PromptOverride.history.get(id=override.pk).history_id

    page = admin_client.get(f"{BASE}preview/triagem/").content.decode()

    assert (
        f'<td id="prompt-version">prompt personalizado #{override.pk} (versão {version})</td>'
    ) in page
    assert "<title>Prévia do prompt final: Triagem |" in page
    assert "<tr><th>Agente</th><td>Triagem</td></tr>" in page


def test_the_preview_of_a_text_calls_it_a_draft_and_names_the_history_roles(
    admin_client: Client, catalog: None
) -> None:
    session = baker.make(Session, state=SessionState.TRIAGE, last_message_at=timezone.now())
    start = timezone.now() - timedelta(minutes=5)
    baker.make(
        Message, session=session, direction=Direction.INBOUND, content="Oi", created_at=start
    )
    baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá!",
        created_at=start + timedelta(seconds=1),
    )
    override = PromptOverride.objects.create(agent="triagem", content="Rascunho")

    page = admin_client.get(f"{BASE}{override.pk}/preview/?session={session.pk}").content.decode()

    assert '<td id="prompt-version">rascunho</td>' in page
    assert '<td id="stage">Triagem</td>' in page
    assert '<tr class="message-user"><th>Cliente</th>' in page
    assert '<tr class="message-assistant"><th>Assistente</th>' in page
    assert ">preview<" not in page


@pytest.mark.parametrize("value", ["abc", "²"])
def test_a_session_that_is_no_id_previews_the_synthetic_sample(
    admin_client: Client, catalog: None, value: str
) -> None:
    response = admin_client.get(f"{BASE}preview/triagem/?session={value}")

    assert response.status_code == 200
    assert response.context["selected_session"] is None


def test_agent_preview_of_an_unknown_agent_is_404(admin_client: Client) -> None:
    assert admin_client.get(f"{BASE}preview/summary/").status_code == 404


def test_start_from_builtin_opens_the_add_form_prefilled_and_stores_nothing(
    admin_client: Client,
) -> None:
    PromptOverride.objects.create(agent="triagem", content="em uso", is_active=True)

    response = admin_client.get(f"{BASE}add/?from_builtin=coleta")

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.initial["agent"] == "coleta"
    assert form.initial["content"] == builtin_template(AgentName.COLETA)
    assert form.initial["is_active"] is False
    assert form.initial["note"] == "Cópia do prompt padrão"
    html = response.content.decode()
    assert '<option value="coleta" selected>' in html
    assert 'name="note" value="Cópia do prompt padrão"' in html
    assert list(PromptOverride.objects.values_list("content", flat=True)) == ["em uso"]


def test_saving_the_prefilled_form_stores_one_inactive_copy(admin_client: Client) -> None:
    for agent in (AgentName.TRIAGEM, AgentName.QUALIFICACAO, AgentName.COLETA):
        response = admin_client.post(
            f"{BASE}add/",
            {
                "agent": agent.value,
                "content": builtin_template(agent),
                "note": "Cópia do prompt padrão",
            },
        )
        assert response.status_code == 302, agent
    drafts = PromptOverride.objects.order_by("agent")
    assert [(d.agent, d.is_active, d.note) for d in drafts] == [
        ("coleta", False, "Cópia do prompt padrão"),
        ("qualificacao", False, "Cópia do prompt padrão"),
        ("triagem", False, "Cópia do prompt padrão"),
    ]
    assert drafts[0].content == builtin_template(AgentName.COLETA)


def test_start_from_builtin_of_an_unknown_agent_opens_an_empty_add_form(
    admin_client: Client,
) -> None:
    response = admin_client.get(f"{BASE}add/?from_builtin=summary")

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert "content" not in form.initial
    assert "agent" not in form.initial


def test_start_from_builtin_needs_the_add_permission() -> None:
    client = logged_in(staff_member(permissions=("prompts_admin.view_promptoverride",)))

    assert client.get(f"{BASE}add/?from_builtin=coleta").status_code == 403
    listing = client.get(BASE).content.decode()
    assert "?from_builtin=" not in listing
    assert "Começar a partir do prompt padrão" not in listing


def test_the_old_start_from_builtin_url_and_action_are_gone(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="coleta", content="a")

    # The admin's catch-all redirects the old URL to a change page that does not exist.
    response = admin_client.post(f"{BASE}start-from-builtin/", {"agent": "triagem"})
    listing = admin_client.post(
        BASE, {"action": "start_from_builtin", "_selected_action": [override.pk]}
    )

    assert response.status_code == 302
    assert response["Location"] == f"{BASE}start-from-builtin/change/"
    # An unknown action: the list again, nothing done.
    assert (listing.status_code, listing["Location"]) == (302, BASE)
    assert PromptOverride.objects.count() == 1


def test_change_list_and_change_form_link_to_the_tools(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi")

    listing = admin_client.get(BASE).content.decode()
    form = admin_client.get(f"{BASE}{override.pk}/change/").content.decode()

    assert (
        '<a class="button" href="/admin/prompts_admin/promptoverride/add/?from_builtin='
        'qualificacao">Qualificação</a>'
    ) in listing
    assert 'href="/admin/prompts_admin/promptoverride/preview/coleta/"' in listing
    assert f'href="/admin/prompts_admin/promptoverride/{override.pk}/preview/"' in form


# --- The unsaved preview: the text as it is in the form ----------------------------------------


def test_the_unsaved_preview_renders_the_posted_text_and_stores_nothing(
    admin_client: Client, catalog: None
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Salvo", is_active=True)

    response = admin_client.post(
        f"{BASE}preview/",
        {"agent": "qualificacao", "content": "Rascunho de {{ agent_name }}", "is_active": "on"},
    )

    assert response.status_code == 200
    assert final_prompt(response).startswith("Rascunho de Lia\n\n" + METADATA)
    assert response.context["prepared"].prompt_version == "preview"
    assert response.context["unsaved"] is True
    html = response.content.decode()
    assert "Texto do formulário, não salvo: nada foi gravado." in html
    # The session picker posts the text again.
    assert '<input type="hidden" name="agent" value="qualificacao">' in html
    assert '<textarea name="content" hidden>\nRascunho de {{ agent_name }}</textarea>' in html
    assert list(PromptOverride.objects.values_list("pk", "content")) == [(override.pk, "Salvo")]
    assert PromptOverride.history.count() == 1
    assert LLMCall.objects.count() == 0


def test_the_unsaved_preview_takes_the_session_from_the_post(
    admin_client: Client, catalog: None
) -> None:
    session = baker.make(
        Session,
        state=SessionState.DATA_COLLECT,
        customer_phone="5511912345678",
        last_message_at=timezone.now(),
    )

    response = admin_client.post(
        f"{BASE}preview/?session=999",
        {"agent": "coleta", "content": "Coleta de {{ customer_phone }}", "session": session.pk},
    )

    assert final_prompt(response).startswith("Coleta de +55 11 91234-5678")
    assert response.context["selected_session"] == session.pk


def test_the_unsaved_preview_lists_the_problems_of_a_refused_text(
    admin_client: Client, catalog: None
) -> None:
    response = admin_client.post(
        f"{BASE}preview/", {"agent": "triagem", "content": "Oi {{ nome }}\n{% lorem %}"}
    )

    assert response.status_code == 200
    assert response.context["prepared"] is None
    assert response.context["problems"] == [
        "Variável desconhecida “nome” na linha 1. As variáveis deste agente são: "
        + ", ".join(sorted(variable_names(AgentName.TRIAGEM)))
        + ".",
        "Linha 2: A tag {% lorem %} não é permitida em prompts.",
    ]
    assert "Este texto não pode ser usado assim; o formulário o recusaria:" in (
        response.content.decode()
    )
    empty = admin_client.post(f"{BASE}preview/", {"agent": "triagem", "content": "  "})
    assert empty.context["problems"] == ["O texto está vazio: não há o que pré-visualizar."]


def test_the_unsaved_preview_needs_a_post_a_prompt_agent_and_a_write_permission() -> None:
    admin = logged_in(staff_member(permissions=("prompts_admin.add_promptoverride",)))
    assert admin.get(f"{BASE}preview/").status_code == 405
    assert admin.post(f"{BASE}preview/", {"agent": "summary", "content": "x"}).status_code == 404
    for client in (
        logged_in(staff_member(SUPPORT)),
        logged_in(staff_member(permissions=("prompts_admin.view_promptoverride",))),
    ):
        response = client.post(f"{BASE}preview/", {"agent": "triagem", "content": "Oi"})
        assert response.status_code == 403
    editor = logged_in(staff_member(PROMPT_EDITORS))
    assert editor.post(f"{BASE}preview/", {"agent": "triagem", "content": "Oi"}).status_code == 200


def test_the_unsaved_preview_refuses_a_post_without_the_csrf_token(catalog: None) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_member(PROMPT_EDITORS))

    response = client.post(f"{BASE}preview/", {"agent": "triagem", "content": "Oi"})

    assert response.status_code == 403


def test_the_add_and_change_forms_post_their_text_to_the_unsaved_preview(
    admin_client: Client,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi")
    button = (
        '<button type="submit" class="button" id="preview-unsaved" name="_preview" '
        'formaction="/admin/prompts_admin/promptoverride/preview/" formmethod="post" '
        'formtarget="_blank" formnovalidate>Pré-visualizar o texto do formulário (não salvo)'
        "</button>"
    )

    add = admin_client.get(f"{BASE}add/").content.decode()
    change = admin_client.get(f"{BASE}{override.pk}/change/").content.decode()

    assert button in add
    assert button in change
    # After the save buttons: Enter in a field still saves.
    assert change.index('name="_save"') < change.index(button)
    assert f"{BASE}{override.pk}/preview/" in change


def test_a_view_only_user_sees_no_unsaved_preview_button() -> None:
    client = logged_in(staff_member(permissions=("prompts_admin.view_promptoverride",)))
    override = PromptOverride.objects.create(agent="triagem", content="Oi")

    page = client.get(f"{BASE}{override.pk}/change/").content.decode()

    assert 'id="preview-unsaved"' not in page


def test_the_preview_shows_the_options_rule_and_code_4_s_buttons_in_the_guards(
    admin_client: Client, catalog: None
) -> None:
    override = PromptOverride.objects.create(agent="coleta", content="Colete.", is_active=False)

    prompt = final_prompt(admin_client.get(f"{BASE}{override.pk}/preview/"))

    guards = prompt[prompt.index(GUARDS) :]
    assert '   - Opções (opcional, com os códigos 1 e 6): "opcoes", uma lista de até 10' in guards
    assert (
        '   - A mensagem do código 4 recebe do sistema os botões "Confirmar" e "Corrigir": não '
        'os escreva no texto nem em "opcoes".'
    ) in guards


def test_the_preview_names_the_per_call_variables_that_break_the_prompt_cache(
    admin_client: Client, catalog: None
) -> None:
    override = PromptOverride.objects.create(
        agent="triagem",
        content="Sou {{ agent_name }}. Olá, {{ customer_name }}! Agora: {{ now }}.",
        is_active=False,
    )

    response = admin_client.get(f"{BASE}{override.pk}/preview/")

    prompt = final_prompt(response)
    html = response.content.decode()
    assert prompt.startswith("Sou Lia. Olá, Cliente Exemplo! Agora: ")
    stable = len("Sou Lia. Olá, ")
    assert (
        f'<td id="cache-share">{stable} de {len(prompt)} caracteres das instruções '
        f"({stable * 100 // len(prompt)}%)</td>"
    ) in html
    assert (
        '<p class="warning" id="cache-breakers">Este texto usa {{ customer_name }}, {{ now }}, cujo valor '
        "muda de uma chamada para outra: o cache do prompt do provedor para onde a primeira "
        "delas aparece"
    ) in html
