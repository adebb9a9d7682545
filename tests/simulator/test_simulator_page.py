"""The simulator page in the admin: staff talk to the bot as a simulated customer; each message runs
the real webhook use case and pipeline with the model answering from the fake OpenAI server, while a
fake Graph API with an access token listens and must get no request.

The POST tests commit (``transaction=True``), as the page does outside a test, so the sends
and the handoff summary that run after the commit run here too."""

import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings
from pytest_django.asserts import assertContains, assertNotContains

from agents.states import AgentName
from conversations.models import Direction, Instance, LLMCall, Session
from prompts_admin.models import PromptOverride, RuntimeConfig
from prompts_admin.selectors import (
    ChosenOverridesPromptSource,
    DatabasePromptSource,
    override_version,
)
from simulator.admin import simulated_phone
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.model_requests import history_of
from tests.helpers.staff import staff_member

URL = "/admin/conversations/session/simulator/"
HANDOFF_TEXT = "Um atendente vai continuar a conversa."
NO_MODEL = (
    "O simulador precisa de um modelo: defina OPENAI_API_KEY (e OPENAI_BASE_URL para qualquer "
    "servidor compatível com a Responses API)."
)


@pytest.fixture
def demo_instance(db: None) -> Instance:
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    return instance


def chat(response_text: str) -> list[str]:
    """The bubbles of the page, in order, as 'customer: …' / 'bot: …'."""
    found = re.findall(r'<p class="bubble bubble-(customer|bot)">(.*?)</p>', response_text)
    return [f"{who}: {text}" for who, text in found]


def meta(response_text: str, name: str) -> list[str]:
    return re.findall(rf'<span class="turn-{name}">(.*?)</span>', response_text)


@pytest.mark.parametrize(
    "client_fixture", ["prompt_editor_client", "support_client", "admin_client"]
)
def test_prompt_editors_support_and_superusers_get_the_form(
    client_fixture: str, request: pytest.FixtureRequest, demo_instance: Instance, settings: Settings
) -> None:
    settings.OPENAI_API_KEY = "configured"
    client: Client = request.getfixturevalue(client_fixture)

    response = client.get(URL)

    assert response.status_code == 200
    assertContains(response, '<textarea name="text" id="simulator-text"')
    assertContains(response, f'<option value="{demo_instance.pk}" selected>')
    assertContains(response, "Escreva a primeira mensagem como um cliente escreveria.")
    assertNotContains(response, NO_MODEL)


@pytest.mark.django_db
def test_other_staff_get_403_and_anonymous_the_login() -> None:
    plain = Client()
    plain.force_login(staff_member(permissions=("conversations.view_session",)))

    assert plain.get(URL).status_code == 403
    assert plain.post(URL, {"text": "Oi"}).status_code == 403
    anonymous = Client().get(URL)
    assert (anonymous.status_code, anonymous["Location"]) == (302, f"/admin/login/?next={URL}")
    assert Session.objects.count() == 0


def test_without_a_model_key_the_page_says_what_to_set(
    admin_client: Client, demo_instance: Instance, settings: Settings
) -> None:
    settings.OPENAI_API_KEY = ""

    response = admin_client.get(URL)
    posted = admin_client.post(URL, {"instance": demo_instance.pk, "text": "Oi"}, follow=True)

    assertContains(response, NO_MODEL, count=1)
    assertContains(posted, "O simulador precisa de um modelo: defina OPENAI_API_KEY.", count=1)
    assert Session.objects.count() == 0


def test_each_staff_member_has_a_phone_of_their_own() -> None:
    assert (simulated_phone(1), simulated_phone(42)) == ("5500900000001", "5500900000042")


@pytest.mark.django_db(transaction=True)
def test_a_message_shows_the_reply_agent_code_tokens_and_cost_and_sends_nothing(
    admin_client: Client,
    admin_user: User,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    openai_settings.queue_text('{"s":1}Olá! Sou a Lia. Como posso ajudar?', input_tokens=1000)

    posted = admin_client.post(URL, {"instance": demo_instance.pk, "text": "Oi"})
    response = admin_client.get(posted["Location"])

    assert (posted.status_code, posted["Location"]) == (302, f"{URL}?instance={demo_instance.pk}")
    session = Session.objects.get()
    page = response.content.decode()
    assert chat(page) == ["customer: Oi", "bot: Olá! Sou a Lia. Como posso ajudar?"]
    assert (
        meta(page, "agents"),
        meta(page, "code"),
        meta(page, "state"),
        meta(page, "packages"),
        meta(page, "tokens"),
        meta(page, "cost"),
    ) == (["triagem"], ["1"], ["Triagem"], ["—"], ["1000 / 5"], ["US$ 0,000153"])
    assert re.fullmatch(r"\d+ ms", meta(page, "latency")[0])
    assertContains(response, f"Conversa #{session.pk}")
    assert (session.customer_phone, session.is_simulated) == (
        simulated_phone(admin_user.pk),
        True,
    )
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert reply.delivery_status == "sent"
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_turns_accumulate_and_a_new_conversation_starts_empty(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    openai_settings.queue_text('{"s":1}Olá!')
    openai_settings.queue_text('{"s":1}De qual análise?')
    openai_settings.queue_text('{"s":1}Olá de novo!')
    data = {"instance": demo_instance.pk}

    admin_client.post(URL, {**data, "text": "Oi"})
    two = admin_client.post(URL, {**data, "text": "Quero um orçamento"}, follow=True)
    admin_client.post(URL, {**data, "reset": "1"})
    reset = admin_client.get(URL)
    after = admin_client.post(URL, {**data, "text": "Oi de novo"}, follow=True)

    first, second = Session.objects.order_by("id")
    assert chat(two.content.decode()) == [
        "customer: Oi",
        "bot: Olá!",
        "customer: Quero um orçamento",
        "bot: De qual análise?",
    ]
    assert chat(reset.content.decode()) == []
    assertContains(reset, "Escreva a primeira mensagem como um cliente escreveria.")
    assert chat(after.content.decode()) == ["customer: Oi de novo", "bot: Olá de novo!"]
    assert (first.state, second.state, second.is_simulated) == ("CLOSED", "TRIAGE", True)
    assert list(second.simulated_turns.values_list("inbound__content", flat=True)) == ["Oi de novo"]
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_handoff_shows_the_summary_card(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()
    openai_settings.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    openai_settings.queue_text(
        '{"motivo_encerramento": "Cliente pediu um atendente", '
        '"proxima_acao": "Ligar para a cliente", "resumo_texto": "Quer falar com uma pessoa."}'
    )

    response = admin_client.post(
        URL, {"instance": demo_instance.pk, "text": "Quero falar com uma pessoa"}, follow=True
    )

    page = response.content.decode()
    session = Session.objects.get()
    summary = session.summaries.get()
    assert chat(page) == ["customer: Quero falar com uma pessoa", f"bot: {HANDOFF_TEXT}"]
    assert (meta(page, "code"), meta(page, "state")) == (["98"], ["Com humano"])
    assertContains(response, "Resumo da transferência", count=1)
    assertContains(
        response, '<span class="summary-next-action">Ligar para a cliente</span>', count=1
    )
    assertContains(response, '<p class="summary-text">Quer falar com uma pessoa.</p>', count=1)
    assert (summary.next_action, summary.summary_text) == (
        "Ligar para a cliente",
        "Quer falar com uma pessoa.",
    )
    assert (session.is_simulated, fake_graph.requests) == (True, [])


@pytest.mark.django_db(transaction=True)
def test_two_editors_do_not_share_a_conversation(
    demo_instance: Instance, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    openai_settings.queue_text('{"s":1}Olá, Ana!')
    openai_settings.queue_text('{"s":1}Olá, Bia!')
    ana, bia = User.objects.create_superuser("ana"), User.objects.create_superuser("bia")
    clients = [Client(), Client()]
    clients[0].force_login(ana)
    clients[1].force_login(bia)

    for client, text in zip(clients, ["Oi, sou Ana", "Oi, sou Bia"], strict=True):
        client.post(URL, {"instance": demo_instance.pk, "text": text})

    assert list(Session.objects.order_by("id").values_list("customer_phone", flat=True)) == [
        simulated_phone(ana.pk),
        simulated_phone(bia.pk),
    ]
    assert chat(clients[1].get(URL).content.decode()) == ["customer: Oi, sou Bia", "bot: Olá, Bia!"]


@pytest.mark.django_db(transaction=True)
def test_a_chosen_draft_answers_for_this_editor_only(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    draft = PromptOverride.objects.create(
        agent="triagem", content="RASCUNHO DE TESTE: responda em JSON.", note="tom mais curto"
    )
    openai_settings.queue_text('{"s":1}Olá!')
    openai_settings.queue_text('{"s":1}Olá, cliente!')

    form = admin_client.get(URL)
    admin_client.post(
        URL, {"instance": demo_instance.pk, "text": "Oi", "prompt_triagem": str(draft.pk)}
    )
    page = admin_client.get(URL)

    assertContains(form, '<option value="">Prompt ativo</option>', count=1)
    assertContains(
        form, f'<option value="{draft.pk}">Rascunho #{draft.pk}: tom mais curto</option>'
    )
    # The draft stays chosen (the instance select may have an option of the same id).
    assertContains(
        page,
        f'<option value="{draft.pk}" selected>Rascunho #{draft.pk}: tom mais curto</option>',
        count=1,
    )
    assert meta(page.content.decode(), "drafts") == [f"triagem #{draft.pk}"]
    [simulated] = openai_settings.requests
    assert "RASCUNHO DE TESTE" in json.dumps(simulated, ensure_ascii=False)
    call = LLMCall.objects.get()
    assert call.prompt_version == override_version(draft.history.latest().history_id, draft.pk)
    # Customers still get the active prompt (none here: the built-in one).
    assert DatabasePromptSource().active_override(AgentName.TRIAGEM) is None
    draft.refresh_from_db()
    assert draft.is_active is False
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", ["²", "abc"])
def test_a_draft_choice_that_is_no_id_answers_with_the_active_prompt(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    value: str,
) -> None:
    openai_settings.queue_text('{"s":1}Olá!')

    response = admin_client.post(
        URL, {"instance": demo_instance.pk, "text": "Oi", "prompt_triagem": value}
    )

    assert response.status_code == 302
    assert LLMCall.objects.get().prompt_version == "builtin"
    assert meta(admin_client.get(URL).content.decode(), "drafts") == []


@pytest.mark.django_db
def test_the_draft_source_falls_back_to_the_active_override() -> None:
    active = PromptOverride.objects.create(agent="triagem", content="ativo", is_active=True)
    draft = PromptOverride.objects.create(agent="triagem", content="rascunho")
    other = PromptOverride.objects.create(agent="coleta", content="de outro agente")

    chosen = ChosenOverridesPromptSource({AgentName.TRIAGEM: draft.pk})
    wrong_agent = ChosenOverridesPromptSource({AgentName.TRIAGEM: other.pk})

    assert [
        getattr(chosen.active_override(AgentName.TRIAGEM), "content", None),
        getattr(wrong_agent.active_override(AgentName.TRIAGEM), "content", None),
        getattr(chosen.active_override(AgentName.COLETA), "content", None),
    ] == ["rascunho", active.content, None]


@pytest.mark.django_db
def test_the_index_links_the_simulator_for_those_who_may_use_it(
    prompt_editor_client: Client,
) -> None:
    plain = Client()
    plain.force_login(staff_member(permissions=("conversations.view_session",)))
    caption = f'<caption><a class="section" href="{URL}">Conversar com o bot</a></caption>'
    link = f'<a href="{URL}">Converse com o bot como se fosse um cliente</a>'

    assertContains(prompt_editor_client.get("/admin/"), caption, count=1)
    assertContains(prompt_editor_client.get("/admin/"), link, count=1)
    assertNotContains(plain.get("/admin/"), link)


@pytest.mark.django_db
def test_the_page_is_called_conversar_com_o_bot_not_simulador(
    prompt_editor_client: Client, demo_instance: Instance
) -> None:
    page = prompt_editor_client.get(URL).content.decode()

    assert "<title>Conversar com o bot | Atendimento WhatsApp</title>" in page
    assert "<h1>Conversar com o bot</h1>" in page
    assert "&rsaquo; Conversar com o bot\n</div>" in page
    assert "Simulador" not in page
    assert "Simulação" not in page


def option_buttons(response_text: str) -> list[tuple[str, str]]:
    """The options the page offers to click: (id, title)."""
    return re.findall(
        r'<button type="submit" class="button simulator-option" name="option" value="(.*?)">'
        r"(.*?)</button>",
        response_text,
    )


def option_chips(response_text: str) -> list[str]:
    return re.findall(r'<span class="simulator-option-chip">(.*?)</span>', response_text)


@pytest.mark.django_db(transaction=True)
def test_a_click_on_a_bot_option_is_sent_as_the_tap_whatsapp_would_send(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    openai_settings.queue_text('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual é o segmento?')
    openai_settings.queue_text('{"s":1}Certo! Qual análise?')
    data = {"instance": demo_instance.pk}
    offered = admin_client.post(URL, {**data, "text": "Oi"}, follow=True)

    tapped = admin_client.post(URL, {**data, "option": "opt2"}, follow=True)

    assert option_buttons(offered.content.decode()) == [
        ("opt1", "Alimentos"),
        ("opt2", "Ambiental"),
    ]
    page = tapped.content.decode()
    assert chat(page) == [
        "customer: Oi",
        "bot: Qual é o segmento?",
        "customer: Ambiental",
        "bot: Certo! Qual análise?",
    ]
    # The older message's options are shown, not offered; the last message has none.
    assert (option_chips(page), option_buttons(page)) == (["Alimentos", "Ambiental"], [])
    session = Session.objects.get()
    question, _answer = session.messages.filter(direction=Direction.OUTBOUND).order_by("id")
    tap = session.messages.filter(direction=Direction.INBOUND).order_by("id").last()
    assert tap is not None
    assert (tap.message_type, tap.content, tap.interactive, tap.reply_to_wamid) == (
        "interactive",
        "Ambiental",
        {"type": "button_reply", "id": "opt2", "title": "Ambiental"},
        question.wa_message_id,
    )
    assert question.interactive is not None
    assert question.interactive["action"]["buttons"][1]["reply"] == {
        "id": "opt2",
        "title": "Ambiental",
    }
    assert history_of(openai_settings.requests[1])[-1]["content"] == "Ambiental"
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_an_option_the_last_bot_message_does_not_offer_is_refused_and_runs_no_turn(
    admin_client: Client,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    openai_settings.queue_text('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual é o segmento?')
    data = {"instance": demo_instance.pk}
    admin_client.post(URL, {**data, "text": "Oi"})

    refused = admin_client.post(URL, {**data, "option": "opt9"}, follow=True)

    assertContains(refused, "Essa opção não está mais disponível: escreva sua resposta.")
    assert Session.objects.get().messages.filter(direction=Direction.INBOUND).count() == 1
    assert openai_settings.request_count == 1
