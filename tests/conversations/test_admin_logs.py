"""Read-only admins (the logs and the sessions), the webhook body, and the write-only token."""

import re

import pytest
from django.db.models import Model
from django.test import Client
from model_bakery import baker

from conversations.models import (
    DeliveryStatusEvent,
    HandoffSummary,
    Instance,
    Lead,
    LLMCall,
    Message,
    Session,
    WebhookDelivery,
)

pytestmark = pytest.mark.django_db

READ_ONLY_MODELS = [Message, LLMCall, WebhookDelivery, HandoffSummary, Lead, DeliveryStatusEvent]
SECRET_TOKEN = "EAAG-secret-token-123"


def admin_url(model: type[Model], action: str, pk: int | None = None) -> str:
    base = f"/admin/conversations/{model._meta.model_name}/"
    return base + {"add": "add/", "change": f"{pk}/change/", "delete": f"{pk}/delete/"}[action]


def make(model: type[Model]) -> Model:
    if model is WebhookDelivery:
        return baker.make(WebhookDelivery, raw_body=b"{}")
    if model is Lead:
        return baker.make(Lead, session=baker.make(Session))
    return baker.make(model)


@pytest.mark.parametrize("model", [*READ_ONLY_MODELS, Session], ids=lambda m: m.__name__)
def test_nobody_adds_rows_from_the_admin_not_even_a_superuser(
    admin_client: Client, model: type[Model]
) -> None:
    before = model._default_manager.count()
    assert admin_client.get(admin_url(model, "add")).status_code == 403
    assert admin_client.post(admin_url(model, "add"), {}).status_code == 403
    assert model._default_manager.count() == before


@pytest.mark.parametrize("model", [*READ_ONLY_MODELS, Session], ids=lambda m: m.__name__)
def test_nobody_deletes_rows_from_the_admin(admin_client: Client, model: type[Model]) -> None:
    obj = make(model)
    response = admin_client.post(admin_url(model, "delete", obj.pk), {"post": "yes"})
    assert response.status_code == 403
    assert model._default_manager.filter(pk=obj.pk).exists()


@pytest.mark.parametrize("model", [*READ_ONLY_MODELS, Session], ids=lambda m: m.__name__)
def test_change_page_is_a_read_only_view(admin_client: Client, model: type[Model]) -> None:
    obj = make(model)
    response = admin_client.get(admin_url(model, "change", obj.pk))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'name="_save"' not in page
    assert f" | Visualizar {model._meta.verbose_name} | " in page


def test_posting_a_change_to_a_message_is_refused(admin_client: Client) -> None:
    message = baker.make(Message, content="original")
    response = admin_client.post(admin_url(Message, "change", message.pk), {"content": "edited"})
    assert response.status_code == 403
    message.refresh_from_db()
    assert message.content == "original"


def test_lists_offer_no_bulk_delete_action(admin_client: Client) -> None:
    baker.make(Message)
    page = admin_client.get("/admin/conversations/message/").content.decode()
    assert "delete_selected" not in page


def test_webhook_body_is_shown_decoded_and_indented(admin_client: Client) -> None:
    delivery = baker.make(
        WebhookDelivery,
        raw_body='{"object":"whatsapp_business_account","entry":[{"id":"1","nome":"ação"}]}'.encode(),
        headers={"X-Hub-Signature-256": "sha256=abc"},
    )
    page = admin_client.get(admin_url(WebhookDelivery, "change", delivery.pk)).content.decode()
    assert "&quot;object&quot;: &quot;whatsapp_business_account&quot;,\n  &quot;entry&quot;" in page
    assert "&quot;nome&quot;: &quot;ação&quot;" in page
    assert "&quot;X-Hub-Signature-256&quot;: &quot;sha256=abc&quot;" in page


def test_webhook_body_that_is_not_json_is_shown_as_received(admin_client: Client) -> None:
    delivery = baker.make(WebhookDelivery, raw_body=b"not json <b>\xff")
    page = admin_client.get(admin_url(WebhookDelivery, "change", delivery.pk)).content.decode()
    assert "not json &lt;b&gt;\ufffd" in page


def test_webhook_list_filters_by_outcome(admin_client: Client) -> None:
    failed = baker.make(WebhookDelivery, raw_body=b"{}", outcome="failed")
    baker.make(WebhookDelivery, raw_body=b"{}", outcome="processed")
    page = admin_client.get("/admin/conversations/webhookdelivery/?outcome__exact=failed")
    ids = re.findall(r"/admin/conversations/webhookdelivery/(\d+)/change/", page.content.decode())
    assert ids == [str(failed.pk)]


def test_session_page_links_to_its_message_log(admin_client: Client) -> None:
    session = baker.make(Session)
    mine = baker.make(Message, session=session)
    baker.make(Message)  # another session's
    page = admin_client.get(f"/admin/conversations/message/?session__id__exact={session.pk}")
    ids = re.findall(r"/admin/conversations/message/(\d+)/change/", page.content.decode())
    assert ids == [str(mine.pk)]


# --- Instance: the access token is write-only ----------------------------------------------


def instance_form(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Vale",
        "phone_number_id": "100000000000001",
        "display_phone": "+55 19 3200-0000",
        "brand_context": "",
        "is_active": "on",
        "new_access_token": "",
    }
    return data | overrides


def test_instance_page_never_shows_the_token(admin_client: Client) -> None:
    instance = baker.make(Instance, access_token=SECRET_TOKEN)
    page = admin_client.get(f"/admin/conversations/instance/{instance.pk}/change/")
    assert SECRET_TOKEN not in page.content.decode()
    list_page = admin_client.get("/admin/conversations/instance/")
    assert SECRET_TOKEN not in list_page.content.decode()


def test_typing_a_new_token_stores_it(admin_client: Client) -> None:
    instance = baker.make(Instance, access_token="old")
    response = admin_client.post(
        f"/admin/conversations/instance/{instance.pk}/change/",
        instance_form(new_access_token=SECRET_TOKEN),
    )
    assert response.status_code == 302
    instance.refresh_from_db()
    assert instance.access_token == SECRET_TOKEN


def test_leaving_the_token_empty_keeps_the_stored_one(admin_client: Client) -> None:
    instance = baker.make(Instance, access_token=SECRET_TOKEN)
    response = admin_client.post(
        f"/admin/conversations/instance/{instance.pk}/change/", instance_form(name="Novo nome")
    )
    assert response.status_code == 302
    instance.refresh_from_db()
    assert (instance.name, instance.access_token) == ("Novo nome", SECRET_TOKEN)


def test_the_stored_token_can_be_removed(admin_client: Client) -> None:
    instance = baker.make(Instance, access_token=SECRET_TOKEN)
    admin_client.post(
        f"/admin/conversations/instance/{instance.pk}/change/",
        instance_form(clear_access_token="on"),
    )
    instance.refresh_from_db()
    assert instance.access_token == ""


def test_typing_and_removing_the_token_at_once_is_refused(admin_client: Client) -> None:
    instance = baker.make(Instance, access_token=SECRET_TOKEN)
    response = admin_client.post(
        f"/admin/conversations/instance/{instance.pk}/change/",
        instance_form(new_access_token="other", clear_access_token="on"),
    )
    assert response.status_code == 200
    assert "Digite um novo token ou remova o atual, não os dois." in response.content.decode()
    instance.refresh_from_db()
    assert instance.access_token == SECRET_TOKEN


def test_instance_with_an_invalid_phone_number_id_is_refused(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/conversations/instance/add/", instance_form(phone_number_id="+55 19 3200")
    )
    assert response.status_code == 200
    assert "Use apenas os dígitos do phone_number_id mostrado pela Meta." in (
        response.content.decode()
    )
    assert Instance.objects.count() == 0
