"""The admin never answers 500 on stored data, on a query string or on an action's
selected ids.

A stored delivery nested 900 levels deep (the pretty-printer's RecursionError) or holding a lone
surrogate; NUL bytes in every filter parameter and in the search of every changelist, which
PostgreSQL refuses in text (``DataError``) — so the changelist tests run there.
"""

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.test import Client
from model_bakery import baker

from conversations.models import Lead, Session, WebhookDelivery

pytestmark = pytest.mark.django_db

# Every registered changelist, from the admin site itself: a new admin is covered as it comes.
CHANGELISTS = sorted(
    f"/admin/{model._meta.app_label}/{model._meta.model_name}/" for model in admin.site._registry
)
# A NUL alone, inside a value, and next to values the filters know.
NUL_VALUES = ["\x00", "TRIAGE\x00"]
# The page, Django's redirect for filter values it cannot use (?e=1), or its 400 for a
# `_to_field` it does not allow (a SuspiciousOperation): never a 500.
ACCEPTED = (200, 302, 400)


def _filter_parameters(client: Client, url: str) -> list[str]:
    """The query parameters the changelist's filters read (and the search's and paging's)."""
    response = client.get(url)
    assert response.status_code == 200, url
    changelist = response.context["cl"]
    names = ["q", "o", "p", "all", "_to_field", "e"]
    for spec in changelist.filter_specs:
        names += spec.expected_parameters()
    return names


def _status(client: Client, url: str, params: dict[str, Any]) -> int:
    return client.get(url, params).status_code


@pytest.mark.postgres
@pytest.mark.parametrize("url", CHANGELISTS)
def test_nul_in_any_filter_or_search_parameter_never_yields_a_500(
    admin_client: Client, url: str
) -> None:
    baker.make(Session, customer_name="Maria")  # a row, so filters with choices show up
    failures = []
    for name in _filter_parameters(admin_client, url):
        for value in NUL_VALUES:
            status = _status(admin_client, url, {name: value})
            if status not in ACCEPTED:
                failures.append((name, value, status))
    # Every parameter at once too, and NUL in a parameter's name.
    every = dict.fromkeys(_filter_parameters(admin_client, url), "\x00")
    assert _status(admin_client, url, every) in ACCEPTED
    assert _status(admin_client, url, {"state\x00": "x", "q": "\x00\x00"}) in ACCEPTED
    assert failures == []


@pytest.mark.parametrize("url", CHANGELISTS)
def test_nul_in_the_search_never_yields_a_500_on_any_database(
    admin_client: Client, url: str
) -> None:
    assert _status(admin_client, url, {"q": "Maria\x00"}) == 200


def _nested(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


@pytest.mark.parametrize("depth", [900, 5_000])
def test_a_stored_delivery_nested_deeply_is_shown_as_received(
    admin_client: Client, depth: int
) -> None:
    body = _nested(depth)
    delivery = baker.make(WebhookDelivery, raw_body=body, outcome="failed")

    response = admin_client.get(f"/admin/conversations/webhookdelivery/{delivery.pk}/change/")

    assert response.status_code == 200
    assert body.decode().replace('"', "&quot;") in response.content.decode()


def test_a_stored_delivery_with_a_lone_surrogate_is_shown_with_a_replacement_character(
    admin_client: Client,
) -> None:
    delivery = baker.make(
        WebhookDelivery, raw_body=b'{"text": "\\ud800x", "name": "ok"}', outcome="failed"
    )

    response = admin_client.get(f"/admin/conversations/webhookdelivery/{delivery.pk}/change/")

    assert response.status_code == 200
    assert "&quot;text&quot;: &quot;\ufffdx&quot;" in response.content.decode()


@pytest.mark.postgres
def test_the_deep_delivery_page_on_postgresql(admin_client: Client) -> None:
    delivery = baker.make(WebhookDelivery, raw_body=_nested(900), outcome="failed")

    response = admin_client.get(f"/admin/conversations/webhookdelivery/{delivery.pk}/change/")

    assert response.status_code == 200


@pytest.mark.parametrize("url", CHANGELISTS)
def test_nul_in_an_object_id_never_yields_a_500(admin_client: Client, url: str) -> None:
    statuses = {
        suffix: admin_client.get(url + suffix).status_code
        for suffix in ("%00/change/", "1%00/change/", "%00/delete/")
    }

    assert {suffix: status for suffix, status in statuses.items() if status >= 500} == {}


def test_nul_in_the_path_is_not_found(admin_client: Client) -> None:
    response = admin_client.get("/admin/conversations/providercircuit/openai%00/change/")

    assert response.status_code == 404


@pytest.mark.parametrize(
    "url",
    [
        "/admin/knowledge_base/kbpackage/abc/history/",
        "/admin/knowledge_base/kbpackage/abc/history/1/",
        "/admin/knowledge_base/kbpackage/1/history/abc/",
        "/admin/prompts_admin/promptoverride/1%00/history/",
    ],
)
def test_a_non_numeric_id_on_a_history_page_is_not_found(admin_client: Client, url: str) -> None:
    assert admin_client.get(url).status_code == 404


def _actions(client: Client, url: str) -> list[str]:
    """The actions the changelist offers (none: no action form)."""
    form = client.get(url).context.get("action_form")
    return [name for name, _label in form.fields["action"].choices if name] if form else []


BAD_SELECTIONS = ["1\x00", "abc", "²", "\x00"]


@pytest.mark.parametrize("url", CHANGELISTS)
def test_a_selected_id_the_primary_key_cannot_hold_never_yields_a_500(
    admin_client: Client, url: str
) -> None:
    baker.make(Session, customer_name="Maria")
    failures = []
    for action in _actions(admin_client, url):
        for value in BAD_SELECTIONS:
            data = {"action": action, "_selected_action": [value], "index": "0"}
            response = admin_client.post(url, data)
            if response.status_code != 302:
                failures.append((action, value, response.status_code))
    assert failures == []


@pytest.mark.parametrize("value", BAD_SELECTIONS)
def test_the_leads_export_with_a_bad_selection_goes_back_to_the_list_with_a_message(
    admin_client: Client, value: str
) -> None:
    lead = baker.make(Lead, session=baker.make(Session))
    url = "/admin/conversations/lead/"

    response = admin_client.post(
        url, {"action": "export_csv", "_selected_action": [str(lead.pk), value], "index": "0"}
    )

    assert (response.status_code, response["Location"]) == (302, url)
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "A seleção não é mais válida. Escolha os itens de novo e tente outra vez."
    ]


def test_the_leads_export_of_a_good_selection_still_runs(admin_client: Client) -> None:
    lead = baker.make(Lead, session=baker.make(Session))

    response = admin_client.post(
        "/admin/conversations/lead/",
        {"action": "export_csv", "_selected_action": [str(lead.pk)], "index": "0"},
    )

    assert (response.status_code, response["Content-Type"]) == (200, "text/csv; charset=utf-8")
