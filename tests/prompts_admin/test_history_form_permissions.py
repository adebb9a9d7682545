"""The version page of every versioned admin: read-only, and closed to POSTs, without change
permission (simple-history's own form would save a view-only user's POST).
"""

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.db.models import Model
from django.forms.models import model_to_dict
from django.test import Client, RequestFactory
from model_bakery import baker

from governance.models import Persona
from knowledge_base.models import Intent, KBPackage, Segment, Service
from prompts_admin.models import PromptOverride, Release, RuntimeConfig, StrategicCompany
from support.models import Label, QuickReply
from tests.helpers.staff import logged_in, staff_member
from versioning.admin import ModelT, VersionedAdmin, history_of

pytestmark = pytest.mark.django_db

PWNED = "PWNED"

# model -> (how to make one, the text field the attack rewrites)
VERSIONED: dict[type[Model], tuple[Callable[[], Model], str]] = {
    KBPackage: (
        lambda: baker.make(KBPackage, package_id="AGUA_POTAVEL", content="Conteúdo original"),
        "content",
    ),
    Segment: (lambda: baker.make(Segment, code="AMBIENTAL", label="Ambiental"), "label"),
    Intent: (lambda: baker.make(Intent, code="ORCAMENTO", label="Orçamento"), "label"),
    Service: (
        lambda: baker.make(
            Service,
            code="AGUA",
            label="Análise de água",
            segment=baker.make(Segment, code="AMBIENTAL"),
            parameter_schema=[],
        ),
        "label",
    ),
    StrategicCompany: (lambda: baker.make(StrategicCompany, name="Acme", cnpj=""), "name"),
    PromptOverride: (
        lambda: baker.make(PromptOverride, agent="triagem", content="Olá {{ agent_name }}"),
        "content",
    ),
    RuntimeConfig: (RuntimeConfig.load, "company_name"),
    QuickReply: (
        lambda: baker.make(
            QuickReply, shortcut="prazo", title="Prazo", text="O laudo sai em 5 dias."
        ),
        "text",
    ),
    Label: (lambda: baker.make(Label, name="urgente", colour="red"), "name"),
    Persona: (
        lambda: baker.make(Persona, title="Produtor rural", description="Quer um orçamento."),
        "description",
    ),
    Release: (lambda: baker.make(Release, name="Março", prompts={}, packages={}), "name"),
}
MODEL_IDS = [model.__name__ for model in VERSIONED]


def model_url(model: type[Model]) -> str:
    return f"/admin/{model._meta.app_label}/{model._meta.model_name}/"


def make_versioned(model: type[ModelT]) -> tuple[ModelT, int]:
    """The object and the id of its only version."""
    factory, _field = VERSIONED[model]
    obj = factory()
    assert isinstance(obj, model)
    versions = list(history_of(obj).values_list("history_id", flat=True))
    assert len(versions) == 1
    return obj, versions[0]


def attack_form(model: type[Model], obj: Model) -> dict[str, Any]:
    """What the version page would submit, with the attack's text and the object deactivated."""
    superuser = User(is_superuser=True, is_staff=True, is_active=True)
    request = RequestFactory().get("/")
    request.user = superuser
    model_admin = admin.site._registry[model]
    form = model_admin.get_form(request, obj)(instance=obj)
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form[name].value()
        if name == "is_active" or value is False:
            continue  # an unchecked box is not submitted: deactivates a strategic company
        if name == "parameter_schema":  # a service's parameters, posted as the form's rows
            data[f"{name}-TOTAL"] = str(len(value))
            for i, entry in enumerate(value):
                data |= {f"{name}-{i}-{key}": entry[key] for key in ("name", "label", "type")}
                data |= {f"{name}-{i}-required": "on"} if entry.get("required") else {}
                data[f"{name}-{i}-choices"] = ", ".join(entry.get("choices", []))
            continue
        data[name] = "on" if value is True else ("" if value is None else value)
    data[VERSIONED[model][1]] = PWNED
    return data


def row(obj: Model) -> dict[str, Any]:
    return model_to_dict(type(obj)._default_manager.get(pk=obj.pk))


def view_permission(model: type[Model]) -> str:
    return f"{model._meta.app_label}.view_{model._meta.model_name}"


def change_permission(model: type[Model]) -> str:
    return f"{model._meta.app_label}.change_{model._meta.model_name}"


# Every (versioned model, staff group) whose group lacks the change permission on the model: the
# catalog and the prompts are the prompt editors', quick replies and labels Support's.
SUPPORT_TOOLS = (QuickReply, Label)
# The Prompt approvers approve releases and change nothing.
GROUPS_WITHOUT_CHANGE = [
    (model, "Prompt editors" if model in SUPPORT_TOOLS else "Support") for model in VERSIONED
] + [(model, "Prompt approvers") for model in VERSIONED]
GROUPS_WITH_CHANGE = [
    (model, "Support" if model in SUPPORT_TOOLS else "Prompt editors") for model in VERSIONED
]
# A Support member reverts only their own quick reply, not the shared one made here
# (tests/support/test_quick_replies.py).
# A release moves only by its steps (publish, approve): its versions are never written back.
REVERTING_GROUPS = [(m, g) for m, g in GROUPS_WITH_CHANGE if m not in (QuickReply, Release)]


def test_the_tables_cover_every_versioned_admin_and_every_group() -> None:
    versioned = {
        model
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, VersionedAdmin)
    }
    assert versioned == set(VERSIONED)
    lacking: set[tuple[type[Model], str]] = set()
    having: set[tuple[type[Model], str]] = set()
    for group in Group.objects.all():
        perms = {
            f"{p.content_type.app_label}.{p.codename}"
            for p in group.permissions.select_related("content_type")
        }
        for model in VERSIONED:
            (having if change_permission(model) in perms else lacking).add((model, group.name))
    assert lacking == set(GROUPS_WITHOUT_CHANGE)
    assert having == set(GROUPS_WITH_CHANGE)


@pytest.mark.parametrize(
    ("model", "group"),
    GROUPS_WITHOUT_CHANGE,
    ids=[f"{m.__name__}-{g}" for m, g in GROUPS_WITHOUT_CHANGE],
)
def test_a_group_without_change_permission_cannot_post_a_version(
    model: type[Model], group: str
) -> None:
    obj, version = make_versioned(model)
    before = row(obj)
    client = logged_in(staff_member(group))

    response = client.post(
        f"{model_url(model)}{obj.pk}/history/{version}/", attack_form(model, obj)
    )

    assert response.status_code == 403
    assert row(obj) == before
    assert history_of(obj).count() == 1


@pytest.mark.parametrize("model", list(VERSIONED), ids=MODEL_IDS)
def test_a_view_only_user_cannot_post_a_version(model: type[Model]) -> None:
    """Support sees no prompts at all; a user given just the view permission is the case that
    simple-history let through for every model."""
    obj, version = make_versioned(model)
    before = row(obj)
    client = logged_in(staff_member(permissions=(view_permission(model),)))
    url = f"{model_url(model)}{obj.pk}/history/{version}/"
    assert client.get(url).status_code == 200

    response = client.post(url, attack_form(model, obj))

    assert response.status_code == 403
    assert row(obj) == before
    assert history_of(obj).count() == 1


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_other_writing_methods_are_refused_too(support_client: Client, method: str) -> None:
    obj, version = make_versioned(KBPackage)

    response = getattr(support_client, method)(f"{model_url(KBPackage)}{obj.pk}/history/{version}/")

    assert response.status_code == 403
    assert history_of(obj).count() == 1


def test_a_view_only_user_sees_the_version_read_only(support_client: Client) -> None:
    package, _version = make_versioned(KBPackage)
    package.content = "Versão antiga do pacote"
    package.save()
    version = history_of(package).latest().history_id
    package.content = "Versão nova"
    package.save()

    response = support_client.get(f"{model_url(KBPackage)}{package.pk}/history/{version}/")

    page = response.content.decode()
    assert response.status_code == 200
    assert '<div class="readonly">Versão antiga do pacote</div>' in page
    assert 'name="content"' not in page
    assert 'name="_save"' not in page  # no Revert button
    assert "<textarea" not in page


def test_an_editor_still_sees_the_version_as_a_form_to_revert(prompt_editor_client: Client) -> None:
    package, _version = make_versioned(KBPackage)
    package.content = "Versão antiga do pacote"
    package.save()
    version = history_of(package).latest().history_id

    page = prompt_editor_client.get(
        f"{model_url(KBPackage)}{package.pk}/history/{version}/"
    ).content.decode()

    assert 'name="content"' in page
    assert 'name="_save"' in page


@pytest.mark.parametrize(
    ("model", "group"), REVERTING_GROUPS, ids=[f"{m.__name__}-{g}" for m, g in REVERTING_GROUPS]
)
def test_a_group_with_change_permission_still_reverts(model: type[Model], group: str) -> None:
    obj, version = make_versioned(model)
    old_row = row(obj)
    field = VERSIONED[model][1]
    setattr(obj, field, "Texto editado depois")
    obj.save()
    editor = staff_member(group)
    client = logged_in(editor)
    url = f"{model_url(model)}{obj.pk}/history/{version}/"
    old_form = client.get(url)
    assert old_form.status_code == 200
    data = attack_form(model, type(obj)._default_manager.get(pk=obj.pk))
    data[field] = old_row[field]
    data.update({"is_active": "on"} if old_row.get("is_active") else {})

    response = client.post(url, data)

    assert response.status_code == 302
    reverted = row(obj)
    assert reverted[field] == old_row[field]
    latest = history_of(obj).latest()
    assert (latest.history_type, latest.history_user, history_of(obj).count()) == ("~", editor, 3)
