"""The staff groups' exact permissions, what each group can do, and login on every admin URL."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.test import Client
from model_bakery import baker

from conversations.models import Instance, ProviderCircuit, Session, WebhookDelivery
from knowledge_base.models import Intent, KBPackage, Segment, Service
from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany
from tests.helpers.staff import logged_in, staff_member
from versioning.admin import VersionedAdmin

pytestmark = pytest.mark.django_db

CONVERSATION_VIEWS = {
    "conversations.view_instance",
    "conversations.view_session",
    "conversations.view_message",
    "conversations.view_deliverystatusevent",
    "conversations.view_llmcall",
    "conversations.view_handoffsummary",
    "conversations.view_lead",
}
EXPECTED_PERMISSIONS = {
    "Prompt editors": CONVERSATION_VIEWS
    | {
        f"{app}.{action}_{model}"
        for app, model in [
            ("prompts_admin", "promptoverride"),
            ("prompts_admin", "strategiccompany"),
            ("knowledge_base", "kbpackage"),
            ("knowledge_base", "segment"),
            ("knowledge_base", "intent"),
            ("knowledge_base", "service"),
        ]
        for action in ("add", "change", "view")
    }
    | {"prompts_admin.change_runtimeconfig", "prompts_admin.view_runtimeconfig"}
    | {
        "governance.add_replayrun",
        "governance.change_replayrun",
        "governance.view_replayrun",
        "governance.view_replayresult",
        "governance.add_prompttestcase",
        "governance.change_prompttestcase",
        "governance.view_prompttestcase",
        "governance.add_prompttestrun",
        "governance.view_prompttestrun",
        "governance.add_persona",
        "governance.change_persona",
        "governance.view_persona",
        "governance.add_personarun",
        "governance.view_personarun",
        "governance.view_personaresult",
        "prompts_admin.add_release",
        "prompts_admin.change_release",
        "prompts_admin.view_release",
    },
    # They approve another editor's release; they change nothing.
    "Prompt approvers": {"prompts_admin.approve_release", "prompts_admin.view_release"},
    "Support": CONVERSATION_VIEWS
    | {
        "conversations.view_personal_data",
        "conversations.view_webhookdelivery",
        "conversations.attend_session",
        "conversations.export_lead",
        "conversations.view_messagetemplate",
        "conversations.view_satisfactionsurvey",
        "knowledge_base.view_kbpackage",
        "knowledge_base.view_segment",
        "knowledge_base.view_intent",
        "knowledge_base.view_service",
        "prompts_admin.view_strategiccompany",
        "support.add_quickreply",
        "support.change_quickreply",
        "support.delete_quickreply",
        "support.view_quickreply",
        "support.add_label",
        "support.change_label",
        "support.view_label",
    },
}


@pytest.mark.parametrize("group_name", sorted(EXPECTED_PERMISSIONS))
def test_data_migration_creates_each_group_with_its_exact_permissions(group_name: str) -> None:
    group = Group.objects.get(name=group_name)
    granted = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }
    assert granted == EXPECTED_PERMISSIONS[group_name]


def test_support_cannot_open_or_change_a_prompt(support_client: Client) -> None:
    override = baker.make(PromptOverride, agent="triagem", content="original")
    url = f"/admin/prompts_admin/promptoverride/{override.pk}/change/"
    assert support_client.get(url).status_code == 403
    response = support_client.post(url, {"agent": "triagem", "content": "hacked", "note": ""})
    assert response.status_code == 403
    override.refresh_from_db()
    assert override.content == "original"
    assert override.history.count() == 1


def test_support_cannot_add_a_prompt_or_a_package(support_client: Client) -> None:
    assert support_client.get("/admin/prompts_admin/promptoverride/add/").status_code == 403
    assert support_client.get("/admin/knowledge_base/kbpackage/add/").status_code == 403


def test_support_reads_packages_without_editing_them(support_client: Client) -> None:
    package = baker.make(KBPackage, package_id="COMPANY_INFO", content="texto")
    url = f"/admin/knowledge_base/kbpackage/{package.pk}/change/"
    assert support_client.get(url).status_code == 200
    response = support_client.post(
        url, {"package_id": "COMPANY_INFO", "title": "t", "description": "d", "content": "novo"}
    )
    assert response.status_code == 403
    package.refresh_from_db()
    assert package.content == "texto"


def test_support_reads_conversations_and_webhook_deliveries(support_client: Client) -> None:
    session = baker.make(Session)
    delivery = baker.make(WebhookDelivery, raw_body=b"{}")
    assert support_client.get("/admin/conversations/session/").status_code == 200
    page = f"/admin/conversations/session/{session.pk}/change/"
    assert support_client.get(page).status_code == 200
    url = f"/admin/conversations/webhookdelivery/{delivery.pk}/change/"
    assert support_client.get(url).status_code == 200


def test_prompt_editor_changes_a_prompt_and_history_records_who(
    prompt_editor_client: Client, prompt_editor_user: User
) -> None:
    override = baker.make(PromptOverride, agent="triagem", content="original")
    response = prompt_editor_client.post(
        f"/admin/prompts_admin/promptoverride/{override.pk}/change/",
        {"agent": "triagem", "content": "nova versão", "note": "tom mais cordial"},
    )
    assert response.status_code == 302
    override.refresh_from_db()
    assert override.content == "nova versão"
    latest = override.history.latest()
    assert (latest.history_user, latest.note) == (prompt_editor_user, "tom mais cordial")


def test_prompt_editor_reads_conversations_but_not_raw_webhooks(
    prompt_editor_client: Client,
) -> None:
    session = baker.make(Session)
    delivery = baker.make(WebhookDelivery, raw_body=b"{}")
    page = f"/admin/conversations/session/{session.pk}/change/"
    assert prompt_editor_client.get(page).status_code == 200
    url = f"/admin/conversations/webhookdelivery/{delivery.pk}/change/"
    assert prompt_editor_client.get(url).status_code == 403


@pytest.mark.parametrize("group_name", ["Prompt editors", "Support"])
def test_neither_group_manages_instances(group_name: str) -> None:
    client = logged_in(staff_member(group_name))
    assert client.get("/admin/conversations/instance/add/").status_code == 403


@pytest.mark.parametrize("group_name", ["Prompt editors", "Support"])
def test_neither_group_deletes_catalog_entries(group_name: str) -> None:
    segment = baker.make(Segment, code="HUMANO")
    client = logged_in(staff_member(group_name))
    response = client.post(f"/admin/knowledge_base/segment/{segment.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert Segment.objects.filter(pk=segment.pk).exists()


def _every_admin_url() -> list[str]:
    """List, add, change, history, a version and the compare view of every model of ours."""
    objects = {
        Instance: lambda: baker.make(Instance),
        Session: lambda: baker.make(Session),
        WebhookDelivery: lambda: baker.make(WebhookDelivery, raw_body=b"{}"),
        PromptOverride: lambda: baker.make(PromptOverride),
        RuntimeConfig: RuntimeConfig.load,
        StrategicCompany: lambda: baker.make(StrategicCompany, cnpj=""),
        Segment: lambda: baker.make(Segment),
        Intent: lambda: baker.make(Intent),
        Service: lambda: baker.make(Service, parameter_schema=[]),
        KBPackage: lambda: baker.make(KBPackage),
        ProviderCircuit: lambda: ProviderCircuit.objects.create(pk="openai"),
    }
    urls = ["/admin/"]
    for model, model_admin in admin.site._registry.items():
        app = model._meta.app_label
        if app not in {"conversations", "prompts_admin", "knowledge_base", "support"}:
            continue
        base = f"/admin/{app}/{model._meta.model_name}/"
        obj = objects.get(model, lambda m=model: baker.make(m))()
        urls += [base, base + "add/", f"{base}{obj.pk}/change/", f"{base}{obj.pk}/history/"]
        if isinstance(model_admin, VersionedAdmin):
            # HistoricalRecords adds `history` to the model class at runtime: no stub declares it.
            version = obj.history.latest()  # type: ignore[union-attr]
            urls += [
                f"{base}{obj.pk}/history/compare/",
                f"{base}{obj.pk}/history/{version.history_id}/",
            ]
    return urls


def test_anonymous_users_are_sent_to_login_from_every_admin_url(client: Client) -> None:
    urls = _every_admin_url()
    assert len(urls) == 1 + 4 * 21 + 2 * 10
    for url in urls:
        response = client.get(url)
        assert (response.status_code, response.headers.get("Location")) == (
            302,
            f"/admin/login/?next={url}",
        ), url


def test_admin_index_is_in_portuguese(admin_client: Client) -> None:
    page = admin_client.get("/admin/").content.decode()
    for label in [
        "Conversas",
        "Base de conhecimento",
        "Prompts e configuração",
        "Prompts personalizados",
        "Pacotes de conhecimento",
        "Configuração de execução",
        "Empresas estratégicas",
        "Chamadas ao modelo",
        "Entregas de webhook",
        "Resumos de transferência",
    ]:
        assert f">{label}<" in page, label


def test_a_superuser_opens_every_admin_page(admin_client: Client) -> None:
    refused = []
    for url in _every_admin_url():
        status = admin_client.get(url).status_code
        read_only_add = url.endswith("/add/") and (
            (
                url.startswith("/admin/conversations/")
                and "/instance/" not in url
                and "/messagetemplate/" not in url
            )
            or "/runtimeconfig/" in url
        )
        if status != (403 if read_only_add else 200):
            refused.append((url, status))
    assert refused == []
