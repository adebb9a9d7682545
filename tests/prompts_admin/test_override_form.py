"""The PromptOverride admin form: a template for the chosen agent, or a message naming the problem."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import translation

from agents.prompts import builtin_template
from agents.states import AgentName
from prompts_admin.admin import PromptOverrideForm
from prompts_admin.models import PromptOverride

pytestmark = pytest.mark.django_db
ADD_URL = "/admin/prompts_admin/promptoverride/add/"


def form_errors(agent: str, content: str) -> list[str]:
    with translation.override("en"):
        form = PromptOverrideForm(data={"agent": agent, "content": content, "note": "teste"})
        form.is_valid()
        return [str(message) for message in form.errors.get("content", [])]


@pytest.mark.parametrize("agent", ["triagem", "qualificacao", "coleta"])
def test_the_builtin_template_is_a_valid_override(agent: str) -> None:
    form = PromptOverrideForm(data={"agent": agent, "content": builtin_template(AgentName(agent))})

    assert form.is_valid(), form.errors


def test_a_template_using_the_agents_variables_is_accepted_and_saved() -> None:
    form = PromptOverrideForm(
        data={
            "agent": "coleta",
            "content": "Você é {{ agent_name }}. Cadastro: {{ registration_data }}.\n"
            "{% if is_open %}Estamos abertos.{% endif %}",
            "is_active": "on",
        }
    )

    assert form.is_valid(), form.errors
    form.save()
    assert PromptOverride.objects.get().is_active is True


def test_an_unknown_variable_is_refused_with_its_name_line_and_the_agents_variables() -> None:
    errors = form_errors("triagem", "Olá!\nSou {{ nome_assistente }}.")

    assert errors == [
        "Unknown variable “nome_assistente” on line 2. The variables of this agent are: "
        "agent_name, brand_context, business_hours, company_name, customer_name, "
        "instance_name, intents, is_open, kb_catalog, loaded_packages, now, segments, "
        "strategic_companies."
    ]


def test_a_variable_of_another_agent_is_refused() -> None:
    errors = form_errors("triagem", "Cadastro: {{ registration_data }}")

    assert len(errors) == 1
    assert errors[0].startswith("Unknown variable “registration_data” on line 1.")
    assert form_errors("coleta", "Cadastro: {{ registration_data }}") == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "{% if is_open %}aberto",
            "Template syntax error: Unclosed tag on line 1: 'if'. Looking for one of: elif, "
            "else, endif.",
        ),
        (
            "Oi\n{% endfor %}",
            "Template syntax error: Invalid block tag on line 2: 'endfor'. Did you forget to "
            "register or load this tag?",
        ),
        (
            "Oi\n\n{{ agent_name",
            "Tag not closed on line 3: “{{ agent_name”. Close it with }} or %}.",
        ),
        (
            '{% include "admin/base.html" %}',
            "The template cannot be rendered: TemplateDoesNotExist: admin/base.html",
        ),
    ],
)
def test_template_errors_are_refused_with_a_clear_message(content: str, expected: str) -> None:
    assert form_errors("qualificacao", content) == [expected]


def test_the_message_is_translated_for_pt_br_staff() -> None:
    with translation.override("pt-br"):
        form = PromptOverrideForm(data={"agent": "coleta", "content": "{{ xpto }}"})
        form.is_valid()
        message = str(form.errors["content"][0])

    assert message.startswith("Variável desconhecida “xpto” na linha 1. As variáveis deste agente")


def test_help_text_lists_every_agents_variables_with_descriptions() -> None:
    with translation.override("en"):
        help_text = str(PromptOverrideForm().fields["content"].help_text)

    assert help_text.startswith("A Django template rendered for every call")
    assert "<code>{{ registration_data }}</code> — dados cadastrais já coletados" in help_text
    assert "<code>{{ strategic_companies }}</code> — empresas estratégicas ativas" in help_text
    assert help_text.count("<li>") == 3


def test_the_admin_refuses_to_save_an_override_with_an_unknown_variable() -> None:
    admin_user = get_user_model().objects.create_superuser("root", "root@example.com", "x")
    client = Client()
    client.force_login(admin_user)

    response = client.post(
        ADD_URL, {"agent": "triagem", "content": "Oi {{ cliente }}", "note": "", "is_active": "on"}
    )

    assert response.status_code == 200
    assert "Variável desconhecida “cliente” na linha 1." in response.content.decode()
    assert PromptOverride.objects.count() == 0


def test_the_admin_saves_a_valid_override() -> None:
    admin_user = get_user_model().objects.create_superuser("root", "root@example.com", "x")
    client = Client()
    client.force_login(admin_user)

    response = client.post(ADD_URL, {"agent": "triagem", "content": "Oi, {{ agent_name }}!"})

    assert response.status_code == 302
    override = PromptOverride.objects.get()
    assert (override.agent, override.content, override.is_active) == (
        "triagem",
        "Oi, {{ agent_name }}!",
        False,
    )
    assert override.history.get().history_user == admin_user
