"""“Guardar como caso de teste” from a model call's page: the form prefilled from the recorded
answer, the case saved with the editor's expectations, masked for an editor without personal
data; the case's page edits them."""

from typing import Any

import pytest
from django.test import Client

from conversations.models import Direction, Instance, LLMCall, Message
from governance.models import PromptTestCase
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import conversation, record_turn
from tests.helpers.staff import PROMPT_EDITORS, logged_in, staff_member

pytestmark = pytest.mark.django_db

# A greeting: a recorded handoff would also ask the model for the handoff's summary.
ANSWER = '{"s":1}Olá, Maria! Em que a equipe pode ajudar?'


def recorded_greeting(instance: Instance, model: FakeOpenAIServer, capture: Any) -> LLMCall:
    session = conversation(instance, customer_name="Maria Souza")
    return record_turn(session, "Oi", ANSWER, model=model, capture=capture)


def from_call_url(call: LLMCall) -> str:
    return f"/admin/governance/prompttestcase/from-call/{call.pk}/"


def test_the_calls_page_links_to_the_form_for_an_editor_and_not_for_support(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    support_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    page = f"/admin/conversations/llmcall/{call.pk}/change/"
    link = f'<a href="{from_call_url(call)}" id="save-test-case">Guardar como caso de teste</a>'

    editor, support = prompt_editor_client.get(page), support_client.get(page)

    assert (editor.status_code, link in editor.content.decode()) == (200, True)
    assert (support.status_code, "save-test-case" in support.content.decode()) == (200, False)
    assert support_client.get(from_call_url(call)).status_code == 403


def test_the_form_is_prefilled_from_the_recorded_answer_masked_for_an_editor(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)

    response = prompt_editor_client.get(from_call_url(call))

    assert response.status_code == 200
    form = response.context["form"]
    assert {name: form[name].value() for name in form.fields} == {
        "title": f"Chamada #{call.pk}",
        "expected_code": 1,
        "expected_state": "",
        "handoff_expected": "no",
        "expected_handoff_reason": "",
        "required_fields": None,
        "must_contain": None,
        "must_not_contain": None,
        "expected_package": "",
        "is_active": True,
    }
    assert response.context["recorded_text"] == "Olá, M***! Em que a equipe pode ajudar?"
    assert response.context["masked"] is True
    assert "Você não pode ler dados pessoais" in response.content.decode()


def test_saving_freezes_the_call_with_the_editors_expectations(
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    editor = staff_member(PROMPT_EDITORS)

    response = logged_in(editor).post(
        from_call_url(call),
        {
            "title": "Pede uma pessoa",
            "expected_code": "98",
            "expected_state": "",
            "handoff_expected": "yes",
            "expected_handoff_reason": "model_requested",
            "required_fields": "motivo\r\n\r\n",
            "must_contain": "equipe\r\n  chamar  ",
            "must_not_contain": "orçamento",
            "expected_package": "",
            "is_active": "on",
        },
    )

    case = PromptTestCase.objects.get()
    assert (response.status_code, response["Location"]) == (
        302,
        f"/admin/governance/prompttestcase/{case.pk}/change/",
    )
    assert (
        case.title,
        case.agent,
        case.llm_call_id,
        case.created_by_id,
        case.masked,
        case.expected_code,
        case.handoff_expected,
        case.expected_handoff_reason,
        case.required_fields,
        case.must_contain,
        case.must_not_contain,
        case.recorded_code,
        case.recorded_text,
        case.context_snapshot["customer_name"],
    ) == (
        "Pede uma pessoa",
        "triagem",
        call.pk,
        editor.pk,
        True,
        98,
        "yes",
        "model_requested",
        ["motivo"],
        ["equipe", "chamar"],
        ["orçamento"],
        1,
        "Olá, M***! Em que a equipe pode ajudar?",
        "M*** S***",
    )
    assert case.history.count() == 1


def test_twenty_lines_are_kept_and_a_twenty_first_refused(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    data = {"title": "x", "handoff_expected": "any", "is_active": "on"}
    lines = [f"texto {n}" for n in range(21)]

    at_limit = prompt_editor_client.post(
        from_call_url(call), data | {"must_not_contain": "\n".join(lines[:20])}
    )
    over = prompt_editor_client.post(
        from_call_url(call), data | {"must_not_contain": "\n".join(lines)}
    )

    assert at_limit.status_code == 302
    assert over.context["form"].errors == {"must_not_contain": ["No máximo 20 linhas."]}
    assert PromptTestCase.objects.get().must_not_contain == lines[:20]


def test_a_line_too_long_is_refused_and_nothing_is_saved(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    data = {"title": "x", "handoff_expected": "any", "is_active": "on"}

    at_limit = prompt_editor_client.post(from_call_url(call), data | {"must_contain": "a" * 200})
    over = prompt_editor_client.post(from_call_url(call), data | {"must_contain": "a" * 201})

    assert at_limit.status_code == 302
    assert over.status_code == 200
    assert over.context["form"].errors == {
        "must_contain": ["Uma linha tem no máximo 200 caracteres."]
    }
    assert PromptTestCase.objects.count() == 1


def test_the_cases_page_edits_the_expectations_and_keeps_a_version(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    prompt_editor_client.post(
        from_call_url(call), {"title": "x", "handoff_expected": "any", "is_active": "on"}
    )
    case = PromptTestCase.objects.get()
    page = f"/admin/governance/prompttestcase/{case.pk}/change/"

    shown = prompt_editor_client.get(page)
    saved = prompt_editor_client.post(
        page,
        {
            "title": "Transfere",
            "expected_code": "98",
            "expected_state": "",
            "handoff_expected": "yes",
            "expected_handoff_reason": "",
            "required_fields": "",
            "must_contain": "equipe",
            "must_not_contain": "",
            "expected_package": "",
            "is_active": "on",
        },
    )

    assert shown.status_code == 200
    assert "Olá, M***! Em que a equipe pode ajudar?" in shown.content.decode()
    assert saved.status_code == 302
    case.refresh_from_db()
    assert (case.title, case.expected_code, case.must_contain, case.history.count()) == (
        "Transfere",
        98,
        ["equipe"],
        2,
    )


def test_a_case_saved_unmasked_shows_its_reply_masked_to_an_editor_without_personal_data(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    reader = staff_member(PROMPT_EDITORS, permissions=("conversations.view_personal_data",))
    logged_in(reader).post(
        from_call_url(call), {"title": "x", "handoff_expected": "any", "is_active": "on"}
    )
    case = PromptTestCase.objects.get()
    page = f"/admin/governance/prompttestcase/{case.pk}/change/"

    masked = prompt_editor_client.get(page).content.decode()
    plain = logged_in(reader).get(page).content.decode()

    assert (case.masked, case.recorded_text) == (False, "Olá, Maria! Em que a equipe pode ajudar?")
    assert ("Olá, M***! Em que a equipe pode ajudar?" in masked, "Maria" in masked) == (True, False)
    assert "Olá, Maria! Em que a equipe pode ajudar?" in plain


def test_adding_cases_without_reading_model_calls_is_refused(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    adder = logged_in(staff_member(permissions=("governance.add_prompttestcase",)))

    assert adder.get(from_call_url(call)).status_code == 403


# --- From a bubble of the conversation --------------------------------------------------------


def test_a_bots_bubble_links_an_editor_to_the_form_of_the_call_that_wrote_it(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    support_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    reply = Message.objects.get(session=call.session, direction=Direction.OUTBOUND)
    page = f"/admin/conversations/session/{call.session_id}/change/"
    link = (
        f'<a class="save-case" href="/admin/governance/prompttestcase/from-message/{reply.pk}/">'
        "Guardar como caso de teste</a>"
    )

    editor, support = prompt_editor_client.get(page), support_client.get(page)
    followed = prompt_editor_client.get(
        f"/admin/governance/prompttestcase/from-message/{reply.pk}/"
    )

    assert (editor.content.decode().count(link), support.content.decode().count("save-case")) == (
        1,
        0,
    )
    assert (followed.status_code, followed["Location"]) == (302, from_call_url(call))
    assert (
        support_client.get(f"/admin/governance/prompttestcase/from-message/{reply.pk}/").status_code
        == 403
    )


def test_a_message_no_agent_answer_wrote_has_no_case(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    inbound = Message.objects.get(session=call.session, direction=Direction.INBOUND)
    reply = Message.objects.get(session=call.session, direction=Direction.OUTBOUND)
    LLMCall.objects.filter(pk=call.pk).update(context_snapshot=None)

    for message_id in (inbound.pk, reply.pk, reply.pk + 1000):
        response = prompt_editor_client.get(
            f"/admin/governance/prompttestcase/from-message/{message_id}/"
        )
        assert response.status_code == 404


@pytest.mark.parametrize("name", ["required_fields", "must_contain", "must_not_contain"])
def test_a_null_character_in_a_line_is_refused_and_the_case_keeps_its_lines(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
    name: str,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    data = {"title": "x", "handoff_expected": "any", "is_active": "on", name: "equipe"}
    prompt_editor_client.post(from_call_url(call), data)
    case = PromptTestCase.objects.get()

    added = prompt_editor_client.post(from_call_url(call), data | {name: "equipe\nor\x00camento"})
    edited = prompt_editor_client.post(
        f"/admin/governance/prompttestcase/{case.pk}/change/", data | {name: "equ\x00ipe"}
    )

    refused = {name: ["Caracteres nulos não são permitidos."]}
    assert (added.status_code, added.context["form"].errors) == (200, refused)
    assert (edited.status_code, edited.context["adminform"].form.errors) == (200, refused)
    case.refresh_from_db()
    assert (PromptTestCase.objects.count(), getattr(case, name), case.history.count()) == (
        1,
        ["equipe"],
        1,
    )


def test_a_call_without_its_context_recorded_has_no_case_form_and_saves_nothing(
    instance: Instance,
    model: FakeOpenAIServer,
    prompt_editor_client: Client,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = recorded_greeting(instance, model, django_capture_on_commit_callbacks)
    LLMCall.objects.filter(pk=call.pk).update(context_snapshot=None)

    shown = prompt_editor_client.get(from_call_url(call))
    posted = prompt_editor_client.post(
        from_call_url(call), {"title": "x", "handoff_expected": "any", "is_active": "on"}
    )
    missing = prompt_editor_client.get("/admin/governance/prompttestcase/from-call/999/")

    assert (shown.status_code, posted.status_code, missing.status_code) == (404, 404, 404)
    assert PromptTestCase.objects.count() == 0


def test_a_missing_case_goes_back_to_the_admin_with_a_message(
    prompt_editor_client: Client,
) -> None:
    for object_id in ("999", "abc", "99999999999999999999"):
        response = prompt_editor_client.get(
            f"/admin/governance/prompttestcase/{object_id}/change/", follow=True
        )

        assert response.redirect_chain == [("/admin/", 302)]
