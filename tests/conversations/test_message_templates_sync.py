"""The approved WhatsApp message templates read from Meta (`message_templates_sync`, the
``sync_message_templates`` command, the daily task) against the fake Graph API over HTTP: pages,
statuses, templates that disappear, failures that change nothing, instances without an
account."""

from datetime import datetime, timedelta
from io import StringIO
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from model_bakery import baker
from pytest_django import Settings

from conversations.message_templates import TemplateSyncRefused, message_templates_sync
from conversations.message_templates_tasks import sync_message_templates
from conversations.models import Instance, MessageTemplate
from tests.fakes.graph_server import FakeGraphAPI
from whatsapp.client import TEMPLATE_FIELDS, GraphClient

pytestmark = pytest.mark.django_db

WABA = "102290129340398"
OTHER_WABA = "200000000000002"
NOW = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.get_fixed_timezone(0))


def meta_template(
    name: str,
    body: str = "Olá, {{1}}! Seu exame de {{2}} está pronto.",
    *,
    status: str = "APPROVED",
    language: str = "pt_BR",
    category: str = "UTILITY",
    template_id: str = "",
    extra: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """One template as Meta's ``message_templates`` lists it."""
    body_component: dict[str, Any] = {"type": "BODY", "text": body}
    if "{{1}}" in body:
        body_component["example"] = {"body_text": [["Maria", "sangue"]]}
    return {
        "name": name,
        "language": language,
        "status": status,
        "category": category,
        "components": [body_component, *extra],
        "id": template_id or f"9{sum(map(ord, name)):014d}",
    }


@pytest.fixture
def instance() -> Instance:
    instance: Instance = baker.make(
        Instance, name="Lab Centro", phone_number_id="100000000000001", waba_id=WABA
    )
    return instance


def sync(**kwargs: Any) -> list[tuple[str, str]]:
    report = message_templates_sync(now=NOW, **kwargs)
    return [(message.level, message.text) for message in report.messages()]


def totals(created: int, updated: int, deactivated: int) -> tuple[str, str]:
    def plural(n: int, one: str, many: str) -> str:
        return f"{n} {one if n == 1 else many}"

    return (
        "success",
        "Modelos de mensagem do WhatsApp sincronizados: "
        f"{plural(created, 'novo', 'novos')}, {plural(updated, 'atualizado', 'atualizados')}, "
        f"{plural(deactivated, 'desativado', 'desativados')}.",
    )


def rows() -> list[tuple[str, str, bool]]:
    return list(
        MessageTemplate.objects.order_by("name").values_list("name", "waba_id", "is_active")
    )


def query_of(request_path: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request_path).query)


# --- Reading the account ---------------------------------------------------------------------


def test_two_pages_of_approved_templates_are_stored_as_meta_sent_them(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    first = meta_template("resultado_pronto", template_id="1001")
    fake_graph.set_templates(
        WABA,
        [
            first,
            meta_template("lembrete_coleta", "Sua coleta é amanhã.", category="MARKETING"),
            meta_template("retomar_contato", "Olá, {{1}}! Podemos continuar?"),
        ],
        page_size=2,
    )

    assert sync() == [totals(3, 0, 0)]

    first_page, second_page = fake_graph.listings
    assert urlsplit(first_page.path).path == f"/v23.0/{WABA}/message_templates"
    assert query_of(first_page.path) == {"fields": [TEMPLATE_FIELDS], "limit": ["100"]}
    assert TEMPLATE_FIELDS == "name,language,status,category,components,id"
    assert query_of(second_page.path)["after"] == ["cursor-2"]
    assert first_page.headers["Authorization"] == "Bearer test-access-token"
    stored = MessageTemplate.objects.get(name="resultado_pronto")
    assert (
        stored.waba_id,
        stored.language,
        stored.category,
        stored.components,
        stored.body,
        stored.parameter_count,
        stored.parameters,
        stored.meta_template_id,
        stored.meta_status,
        stored.is_active,
        stored.synced_at,
    ) == (
        WABA,
        "pt_BR",
        "UTILITY",
        first["components"],
        "Olá, {{1}}! Seu exame de {{2}} está pronto.",
        2,
        ["{{1}}", "{{2}}"],
        "1001",
        "APPROVED",
        True,
        NOW,
    )
    assert MessageTemplate.objects.get(name="lembrete_coleta").parameter_count == 0
    assert MessageTemplate.objects.get(name="retomar_contato").parameter_count == 1


def test_templates_not_approved_are_not_offered(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.set_templates(
        WABA,
        [
            meta_template("aprovado"),
            meta_template("em_analise", status="PENDING"),
            meta_template("rejeitado", status="REJECTED"),
            meta_template("pausado", status="PAUSED"),
        ],
    )

    assert sync() == [totals(1, 0, 0)]

    assert rows() == [("aprovado", WABA, True)]


def test_a_template_paused_at_meta_is_deactivated_at_the_next_sync(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("lembrete")])
    sync()
    fake_graph.set_templates(
        WABA, [meta_template("aviso"), meta_template("lembrete", status="PAUSED")]
    )

    assert sync() == [totals(0, 0, 1)]

    assert rows() == [("aviso", WABA, True), ("lembrete", WABA, False)]


def test_a_template_gone_from_meta_is_deactivated_not_deleted(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("antigo")])
    sync()
    fake_graph.set_templates(WABA, [meta_template("aviso")])

    assert sync() == [totals(0, 0, 1)]

    assert rows() == [("antigo", WABA, False), ("aviso", WABA, True)]
    assert MessageTemplate.objects.get(name="antigo").synced_at == NOW


def test_a_second_sync_of_the_same_templates_changes_nothing(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("lembrete")])
    sync()

    assert sync() == [totals(0, 0, 0)]

    assert MessageTemplate.objects.count() == 2


def test_a_template_changed_at_meta_or_approved_again_is_updated(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("lembrete")])
    sync()
    MessageTemplate.objects.filter(name="lembrete").update(is_active=False)
    fake_graph.set_templates(
        WABA,
        [meta_template("aviso", "Olá, {{1}}!", category="MARKETING"), meta_template("lembrete")],
    )

    assert sync() == [totals(0, 2, 0)]

    aviso = MessageTemplate.objects.get(name="aviso")
    assert (aviso.body, aviso.category, aviso.parameter_count, aviso.parameters) == (
        "Olá, {{1}}!",
        "MARKETING",
        1,
        ["{{1}}"],
    )
    assert MessageTemplate.objects.get(name="lembrete").is_active is True


def test_a_template_registered_by_hand_is_adopted_keeping_its_labels(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    by_hand = MessageTemplate.objects.create(
        name="retomar_contato",
        body="Olá, {{1}}! Podemos continuar seu orçamento de {{2}}?",
        parameters=["Nome", "Serviço"],
        parameter_count=2,
    )
    fake_graph.set_templates(
        WABA,
        [meta_template("retomar_contato", "Olá, {{1}}! Podemos continuar seu orçamento de {{2}}?")],
    )

    assert sync() == [totals(0, 1, 0)]

    by_hand.refresh_from_db()
    assert (by_hand.waba_id, by_hand.parameters, by_hand.meta_status) == (
        WABA,
        ["Nome", "Serviço"],
        "APPROVED",
    )
    assert MessageTemplate.objects.count() == 1


def test_templates_this_app_cannot_fill_in_are_counted_and_not_offered(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    image_header = {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["h"]}}
    text_header = {"type": "HEADER", "format": "TEXT", "text": "Resultado"}
    header_variable = {"type": "HEADER", "format": "TEXT", "text": "Olá, {{1}}"}
    url_variable = {
        "type": "BUTTONS",
        "buttons": [{"type": "URL", "text": "Ver", "url": "https://lab.example/r/{{1}}"}],
    }
    fixed_buttons = {
        "type": "BUTTONS",
        "buttons": [
            {"type": "QUICK_REPLY", "text": "Sim"},
            {"type": "URL", "text": "Site", "url": "https://lab.example/"},
            {"type": "PHONE_NUMBER", "text": "Ligar", "phone_number": "+551130000000"},
        ],
    }
    otp = {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE"}]}
    fake_graph.set_templates(
        WABA,
        [
            meta_template("com_imagem", extra=(image_header,)),
            meta_template("nomeado", "Olá, {{primeiro_nome}}!"),
            meta_template("link_variavel", extra=(url_variable,)),
            meta_template("cabecalho_variavel", extra=(header_variable,)),
            meta_template("codigo", category="AUTHENTICATION", extra=(otp,)),
            meta_template("completo", extra=(text_header, {"type": "FOOTER", "text": "Lab"})),
            meta_template("botoes_fixos", extra=(fixed_buttons,)),
        ],
    )

    assert sync() == [
        totals(2, 0, 0),
        (
            "warning",
            "5 modelos de mensagem do WhatsApp aprovados não são oferecidos: precisam de "
            "cabeçalho com mídia, parâmetros nomeados ou botão com variável, que não podem ser "
            "preenchidos aqui.",
        ),
    ]
    assert rows() == [("botoes_fixos", WABA, True), ("completo", WABA, True)]


def test_instances_sharing_an_account_are_read_once_with_the_instance_token(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    baker.make(
        Instance,
        name="Lab Sul",
        phone_number_id="100000000000002",
        waba_id=WABA,
        access_token="token-do-lab-sul",
    )
    fake_graph.set_templates(WABA, [meta_template("aviso")])

    assert sync() == [totals(1, 0, 0)]

    [listing] = fake_graph.listings
    assert listing.headers["Authorization"] == "Bearer token-do-lab-sul"


def test_each_account_has_its_own_templates(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    baker.make(Instance, name="Outra marca", phone_number_id="100000000000003", waba_id=OTHER_WABA)
    fake_graph.set_templates(WABA, [meta_template("aviso")])
    fake_graph.set_templates(OTHER_WABA, [meta_template("aviso"), meta_template("promo")])

    assert sync() == [totals(3, 0, 0)]

    assert rows() == [
        ("aviso", WABA, True),
        ("aviso", OTHER_WABA, True),
        ("promo", OTHER_WABA, True),
    ]


def test_an_instance_without_an_account_is_skipped_with_a_message(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    baker.make(Instance, name="Lab Novo", phone_number_id="100000000000004", waba_id="")
    baker.make(Instance, name="Desligada", phone_number_id="100000000000005", is_active=False)
    fake_graph.set_templates(WABA, [meta_template("aviso")])

    assert sync() == [
        totals(1, 0, 0),
        (
            "warning",
            "A instância Lab Novo não tem o ID da conta do WhatsApp Business: nada foi "
            "sincronizado para ela. Preencha-o na instância.",
        ),
    ]


def test_only_instances_without_an_account_read_nothing(fake_graph: FakeGraphAPI) -> None:
    baker.make(Instance, name="Lab Novo", phone_number_id="100000000000004", waba_id="")

    messages = sync()

    assert [level for level, _text in messages] == ["warning"]
    assert fake_graph.requests == []


def test_no_active_instance_says_so(fake_graph: FakeGraphAPI) -> None:
    assert sync() == [("warning", "Nenhuma instância ativa: nada a sincronizar.")]


def test_one_instance_by_name(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    baker.make(Instance, name="Outra marca", phone_number_id="100000000000003", waba_id=OTHER_WABA)
    fake_graph.set_templates(WABA, [meta_template("aviso")])

    assert sync(instance_name="Lab Centro") == [totals(1, 0, 0)]

    assert [urlsplit(r.path).path for r in fake_graph.listings] == [
        f"/v23.0/{WABA}/message_templates"
    ]


def test_an_unknown_instance_name_is_refused(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    with pytest.raises(TemplateSyncRefused) as refused:
        message_templates_sync(now=NOW, instance_name="Lab Norte")

    assert refused.value.message == "Não há instância ativa com o nome Lab Norte."


# --- Failures change nothing -----------------------------------------------------------------


@pytest.fixture
def synced(fake_graph: FakeGraphAPI, instance: Instance) -> list[tuple[str, str, bool]]:
    """Two active templates from an earlier sync."""
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("lembrete")])
    sync()
    fake_graph.set_templates(WABA, [])
    return rows()


def failure(error: str) -> tuple[str, str]:
    return (
        "error",
        f"A conta do WhatsApp Business {WABA} (Lab Centro) não pôde ser lida: {error}. "
        "Nada foi alterado nos modelos de mensagem do WhatsApp dela.",
    )


def test_a_refused_token_changes_nothing_and_says_why(
    fake_graph: FakeGraphAPI, synced: list[tuple[str, str, bool]]
) -> None:
    fake_graph.respond_error(401, 190, "Error validating access token: Session has expired")

    assert sync() == [
        failure(
            "o token de acesso foi recusado (expirado ou revogado): Error validating access "
            "token: Session has expired"
        )
    ]
    assert rows() == synced == [("aviso", WABA, True), ("lembrete", WABA, True)]


def test_a_wrong_account_or_permission_says_what_to_check(
    fake_graph: FakeGraphAPI, synced: list[tuple[str, str, bool]]
) -> None:
    fake_graph.respond_error(400, 100, "Unsupported get request.")

    assert sync() == [
        failure(
            "a Meta recusou o pedido (ID da conta errado, ou token sem a permissão "
            "whatsapp_business_management): Unsupported get request."
        )
    ]
    assert rows() == synced


def test_a_server_error_changes_nothing(
    fake_graph: FakeGraphAPI, synced: list[tuple[str, str, bool]]
) -> None:
    fake_graph.respond_json(500, {"unexpected": True})

    assert sync() == [failure("Erro HTTP 500 da Graph API")]
    assert rows() == synced


def test_a_failed_second_page_deactivates_nothing(
    fake_graph: FakeGraphAPI, synced: list[tuple[str, str, bool]]
) -> None:
    earlier = len(fake_graph.listings)
    paging = {"cursors": {"before": "c0", "after": "c1"}, "next": "https://graph.example/next"}
    fake_graph.respond_json(200, {"data": [meta_template("aviso")], "paging": paging})
    fake_graph.respond_json(503, {"error": {"message": "Service temporarily unavailable"}})

    assert sync() == [failure("Service temporarily unavailable")]
    assert len(fake_graph.listings) - earlier == 2
    assert rows() == synced


def test_a_timeout_changes_nothing(
    fake_graph: FakeGraphAPI, synced: list[tuple[str, str, bool]]
) -> None:
    fake_graph.respond_delay(1.0)
    client = GraphClient(base_url=fake_graph.base_url, timeout=httpx.Timeout(0.2))

    with client:
        messages = sync(client=client)

    assert messages == [failure("Tempo esgotado na Graph API")]
    assert rows() == synced


def test_an_account_without_any_token_is_not_read(
    fake_graph: FakeGraphAPI, instance: Instance, settings: Settings
) -> None:
    settings.WHATSAPP_ACCESS_TOKEN = ""

    assert sync() == [
        failure("sem token de acesso (nem o da instância, nem WHATSAPP_ACCESS_TOKEN)")
    ]
    assert fake_graph.requests == []


def test_one_failed_account_does_not_stop_the_others(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    baker.make(Instance, name="Outra marca", phone_number_id="100000000000003", waba_id=OTHER_WABA)
    fake_graph.set_templates(OTHER_WABA, [meta_template("promo")])
    fake_graph.respond_json(500, {})  # the first account read: Lab Centro's

    messages = sync()

    assert messages == [totals(1, 0, 0), failure("Erro HTTP 500 da Graph API")]
    assert rows() == [("promo", OTHER_WABA, True)]


# --- The command and the daily task ----------------------------------------------------------


def test_the_command_prints_the_outcome(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso")])
    out = StringIO()

    call_command("sync_message_templates", stdout=out)

    assert out.getvalue() == (
        "Modelos de mensagem do WhatsApp sincronizados: 1 novo, 0 atualizados, 0 desativados.\n"
    )


def test_the_command_for_one_instance(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso")])

    call_command("sync_message_templates", "--instance", "Lab Centro", stdout=StringIO())

    assert rows() == [("aviso", WABA, True)]


def test_the_command_fails_for_an_unknown_instance(fake_graph: FakeGraphAPI) -> None:
    with pytest.raises(CommandError, match=r"Não há instância ativa com o nome Lab Norte\."):
        call_command("sync_message_templates", "--instance", "Lab Norte")


def test_the_command_fails_when_an_account_could_not_be_read(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    fake_graph.respond_error(401, 190, "Session has expired")
    err = StringIO()

    with pytest.raises(CommandError, match=r"1 conta do WhatsApp Business não pôde ser lida\."):
        call_command("sync_message_templates", stdout=StringIO(), stderr=err)

    assert "não pôde ser lida: o token de acesso foi recusado" in err.getvalue()


def test_the_daily_task_syncs(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso"), meta_template("x", status="PENDING")])

    assert sync_message_templates.delay().get() == {
        "created": 1,
        "updated": 0,
        "deactivated": 0,
        "unsupported": 0,
        "failed_accounts": 0,
        "skipped_instances": 0,
    }


def test_the_synced_at_is_the_sync_time(fake_graph: FakeGraphAPI, instance: Instance) -> None:
    fake_graph.set_templates(WABA, [meta_template("aviso")])
    later = NOW + timedelta(days=1)

    message_templates_sync(now=later)

    assert MessageTemplate.objects.get().synced_at == later


# --- Rows registered before the sync existed -------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_templates_registered_by_hand_valid() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("conversations", "0018_session_viewer")]
    after = [("conversations", "0019_message_template_sync")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("conversations", "MessageTemplate")
    old.objects.create(
        name="retomar_contato", body="Olá, {{1}}! E o {{2}}?", parameters=["Nome", "Serviço"]
    )
    old.objects.create(name="boas_vindas", body="Olá!", parameters=[], is_active=False)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)

        assert list(
            MessageTemplate.objects.order_by("name").values_list(
                "name", "waba_id", "parameter_count", "parameters", "is_active", "synced_at"
            )
        ) == [
            ("boas_vindas", "", 0, [], False, None),
            ("retomar_contato", "", 2, ["Nome", "Serviço"], True, None),
        ]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
