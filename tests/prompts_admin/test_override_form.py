"""The PromptOverride admin form: a template for the chosen agent, or a message naming the problem."""

import time

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from agents.prompts import builtin_template
from agents.states import AgentName
from agents.templating import PROMPT_TEMPLATE_MAX_CHARS
from prompts_admin.admin import PromptOverrideForm
from prompts_admin.models import PromptOverride
from tests.helpers.fake_collaborators import TEMPLATE_ATTACKS

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
            # No replay of this text: the activation gate asks for a confirmation.
            "confirm_activation": "on",
            "change_reason": "teste",
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
        "instance_name, intents, is_open, kb_catalog, loaded_packages, now, segments."
    ]


def test_an_override_using_the_removed_strategic_companies_variable_is_refused() -> None:
    errors = form_errors("triagem", "Sou {{ agent_name }}.\nEmpresas:\n{{ strategic_companies }}")

    assert errors == [
        "Unknown variable “strategic_companies” on line 3. The variables of this agent are: "
        "agent_name, brand_context, business_hours, company_name, customer_name, "
        "instance_name, intents, is_open, kb_catalog, loaded_packages, now, segments."
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
            "The {% if %} block opened on line 1 is not closed: add its {% endif %}.",
        ),
        ("Oi\n{% endfor %}", "Line 2: The tag {% endfor %} is not allowed in prompts."),
        (
            "Oi\n{% else %}",
            "{% else %} on line 2 is out of place: it only goes inside a block opened before "
            "it ({% if %} … {% endif %}, or {% comment %} … {% endcomment %}), once.",
        ),
        (
            "Oi\n\n{% if is_open x %}a{% endif %}",
            "Syntax error on line 3 (Unused 'x' at end of if expression.): check the {{ }} and "
            "{% %} of that line.",
        ),
        (
            "Oi\n\n{{ agent_name",
            "Tag not closed on line 3: “{{ agent_name”. Close it with }} or %}.",
        ),
        (
            '{% include "admin/base.html" %}',
            "Line 1: The tag {% include %} is not allowed in prompts.",
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

    assert help_text.startswith(
        "The text is assembled for every call with its agent&#x27;s variables, written as "
        "{{ name }}. The conversation context and the fixed rules are always added after it."
        '<details class="prompt-variables"><summary>See the available variables</summary>'
        "The variables of each agent:<ul>"
    )
    assert "<code>{{ registration_data }}</code> — dados cadastrais já coletados" in help_text
    assert "strategic_companies" not in help_text
    assert help_text.count('<li data-agent-variables="') == 3
    assert " hidden>" not in help_text
    assert help_text.endswith(
        "</ul>Allowed: {% if %} / {% elif %} / {% else %} / {% endif %} (at most 10 levels), "
        "{% comment %} and {# … #}, and the filters capfirst, default, default_if_none, length, "
        "lower, title, truncatechars, truncatewords, upper, yesno. At most 30,000 characters, "
        "and 60,000 once rendered.</details>"
    )


def test_the_admin_refuses_to_save_an_override_with_an_unknown_variable(
    admin_client: Client,
) -> None:
    response = admin_client.post(
        ADD_URL, {"agent": "triagem", "content": "Oi {{ cliente }}", "note": "", "is_active": "on"}
    )

    assert response.status_code == 200
    assert "Variável desconhecida “cliente” na linha 1." in response.content.decode()
    assert PromptOverride.objects.count() == 0


def test_the_admin_saves_a_valid_override(admin_client: Client, admin_user: User) -> None:
    response = admin_client.post(ADD_URL, {"agent": "triagem", "content": "Oi, {{ agent_name }}!"})

    assert response.status_code == 302
    override = PromptOverride.objects.get()
    assert (override.agent, override.content, override.is_active) == (
        "triagem",
        "Oi, {{ agent_name }}!",
        False,
    )
    assert override.history.get().history_user == admin_user


# --- The allow-list and the caps -------------------------------------------------------------------

ATTACK_MESSAGES = {
    "lorem": "Linha 2: A tag {% lorem %} não é permitida em prompts.",
    "ljust": "Linha 1: O filtro |ljust não é permitido em prompts.",
    "nested-for": "Linha 1: A tag {% for %} não é permitida em prompts.",
    "conditional": "Linha 1: O filtro |ljust não é permitido em prompts.",
}


LOAD_REFUSED = (
    "{%% load %%} não é permitido em prompts (linha %d): nenhuma biblioteca de tags pode ser "
    "carregada. Permitidos: as tags {%% if %%}, {%% elif %%}, {%% else %%}, {%% endif %%}, "
    "{%% comment %%} … {%% endcomment %%}, {# … #} e os filtros capfirst, default, "
    "default_if_none, length, lower, title, truncatechars, truncatewords, upper, yesno."
)


def test_load_is_refused_in_pt_br_with_its_line_and_what_is_allowed() -> None:
    assert pt_br_errors("coleta", "Oi\n{% load i18n %}") == [LOAD_REFUSED % 2]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "Oi\n{% if is_open %}aberto",
            "O bloco {% if %} aberto na linha 2 não foi fechado: falta o {% endif %}.",
        ),
        (
            "Oi\n\n{% endif %}",
            "O {% endif %} da linha 3 está fora de lugar: ele só vale dentro de um bloco aberto "
            "antes ({% if %} … {% endif %}, ou {% comment %} … {% endcomment %}), uma vez.",
        ),
        (
            "{{ agent_name|lower: }}",
            "Erro de sintaxe na linha 1 (Could not parse the remainder: ':' from "
            "'agent_name|lower:'): confira as {{ }} e {% %} dessa linha.",
        ),
        ("a\n{{ agent_name|nada }}", "Linha 2: O filtro |nada não é permitido em prompts."),
    ],
    ids=["unclosed-if", "stray-endif", "syntax", "unknown-filter"],
)
def test_syntax_errors_are_worded_in_pt_br_with_their_line(content: str, expected: str) -> None:
    assert pt_br_errors("coleta", content) == [expected]


def pt_br_errors(agent: str, content: str) -> list[str]:
    with translation.override("pt-br"):
        form = PromptOverrideForm(data={"agent": agent, "content": content, "note": "teste"})
        form.is_valid()
        return [str(message) for message in form.errors.get("content", [])]


@pytest.mark.parametrize("attack", TEMPLATE_ATTACKS)
def test_each_attack_is_refused_at_save_with_a_message_naming_the_construct_quickly(
    attack: str,
) -> None:
    content, _problem = TEMPLATE_ATTACKS[attack]

    started = time.perf_counter()
    errors = pt_br_errors("triagem", content)
    elapsed = time.perf_counter() - started

    assert errors == [ATTACK_MESSAGES[attack]]
    assert elapsed < 0.5


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{% widthratio 1 1 100000000 %}{{ agent_name|center:"9" }}{% now "Y" %}',
            [
                "Linha 1: A tag {% widthratio %} não é permitida em prompts.",
                "Linha 1: O filtro |center não é permitido em prompts.",
                "Linha 1: A tag {% now %} não é permitida em prompts.",
            ],
        ),
        (
            "{% load %}{% cycle 'a' 'b' %}{{ agent_name|rjust:5 }}",
            [
                LOAD_REFUSED % 1,
                "Linha 1: A tag {% cycle %} não é permitida em prompts.",
                "Linha 1: O filtro |rjust não é permitido em prompts.",
            ],
        ),
        (
            "{% with a=agent_name %}{{ a }}{% endwith %}",
            ["Linha 1: A tag {% with %} não é permitida em prompts."],
        ),
        (
            "{{ customer_name.upper }}",
            [
                "Linha 1: “customer_name.upper”: atributos de variáveis não são permitidos em prompts; "
                "use a própria variável."
            ],
        ),
        (
            "{% if is_open %}" * 11 + "x" + "{% endif %}" * 11,
            ["Os blocos {% if %} podem ter no máximo 10 níveis de aninhamento."],
        ),
        (
            '{% if customer_name == "" %}{{ customer_name|default:"'
            + "ﬃ" * 25_000
            + '"|upper }}{% endif %}',
            [
                "O prompt renderizado passa do limite de 60.000 caracteres (testado com os "
                "valores de exemplo e com valores vazios)."
            ],
        ),
    ],
    ids=["widthratio-center-now", "load-cycle-rjust", "with", "attribute", "depth", "rendered"],
)
def test_other_refused_constructs_and_limits_are_named_in_pt_br(
    content: str, expected: list[str]
) -> None:
    assert pt_br_errors("coleta", content) == expected


def test_a_template_over_the_length_cap_gets_one_message_the_fields_own() -> None:
    errors = pt_br_errors("coleta", "{{ agent_name }}" * (PROMPT_TEMPLATE_MAX_CHARS // 16 + 1))

    assert errors == [
        "Certifique-se de que o valor tenha no máximo 30000 caracteres (ele possui 30016)."
    ]


def test_the_admin_refuses_an_attack_and_writes_nothing(admin_client: Client) -> None:
    started = time.perf_counter()
    response = admin_client.post(
        ADD_URL,
        {"agent": "triagem", "content": TEMPLATE_ATTACKS["lorem"][0], "is_active": "on"},
        HTTP_ACCEPT_LANGUAGE="pt-br",
    )
    elapsed = time.perf_counter() - started

    assert response.status_code == 200
    assert "Linha 2: A tag {% lorem %} não é permitida em prompts." in response.content.decode()
    assert PromptOverride.objects.count() == 0
    assert PromptOverride.history.count() == 0
    assert elapsed < 1.0


# --- The help lists the selected agent's variables only -----------------------------------------


def variable_groups(page: str) -> dict[str, bool]:
    """agent -> whether its group of variables is shown."""
    return {
        agent: f'<li data-agent-variables="{agent}"><strong>' in page
        for agent in ("triagem", "qualificacao", "coleta")
        if f'data-agent-variables="{agent}"' in page
    }


def test_the_help_lists_the_variables_of_the_overrides_agent_only(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="coleta", content="Oi")

    page = admin_client.get(f"/admin/prompts_admin/promptoverride/{override.pk}/change/")

    html_page = page.content.decode()
    assert variable_groups(html_page) == {"triagem": False, "qualificacao": False, "coleta": True}
    assert '<li data-agent-variables="triagem" hidden><strong>Triagem</strong>' in html_page
    assert '<script src="/static/prompts_admin/admin/override_form.js"></script>' in html_page


def test_the_variables_are_folded_under_a_pt_br_summary_below_one_sentence(
    admin_client: Client,
) -> None:
    page = admin_client.get(ADD_URL).content.decode()

    assert (
        "O texto é montado a cada chamada com as variáveis do seu agente, escritas como "
        "{{ nome }}. O contexto da conversa e as regras fixas são sempre acrescentados depois "
        'dele.<details class="prompt-variables"><summary>Ver as variáveis disponíveis</summary>'
        "As variáveis de cada agente:<ul>"
    ) in page
    assert "Template Django" not in page
    assert "guards" not in page


def test_the_add_form_lists_every_agent_until_one_is_chosen(admin_client: Client) -> None:
    blank = admin_client.get(ADD_URL).content.decode()
    prefilled = admin_client.get(f"{ADD_URL}?from_builtin=triagem").content.decode()
    refused = admin_client.post(
        ADD_URL, {"agent": "qualificacao", "content": "{{ nada }}"}
    ).content.decode()

    assert variable_groups(blank) == {"triagem": True, "qualificacao": True, "coleta": True}
    assert variable_groups(prefilled) == {"triagem": True, "qualificacao": False, "coleta": False}
    assert variable_groups(refused) == {"triagem": False, "qualificacao": True, "coleta": False}
