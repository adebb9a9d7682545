"""The session pages in pt-BR, read through the admin: the handoff by its motive and explained, the
summary's error as a sentence, events as sentences, collected data labelled by the service schema
with sim/não, CPF formatted (masked without the permission), WhatsApp's bold in the bubbles."""

import html
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone
from model_bakery import baker

from conversations.models import Direction, HandoffSummary, Message, Session
from knowledge_base.models import Segment, Service

pytestmark = pytest.mark.django_db


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def client_of(group: str) -> Client:
    user = baker.make(User, username=f"staff-{uuid.uuid4().hex[:8]}", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def session() -> Session:
    now = timezone.now()
    segment = baker.make(Segment, code="AMBIENTAL", label="Ambiental")
    baker.make(
        Service,
        code="AGUA_POTABILIDADE",
        segment=segment,
        parameter_schema=[
            {"name": "laudo_assinado", "label": "Laudo assinado", "type": "boolean"},
            {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text"},
        ],
    )
    session = baker.make(
        Session,
        customer_name="Ana Lima",
        customer_phone="5511912345678",
        customer_document="52998224725",
        state="HUMAN",
        service="AGUA_POTABILIDADE",
        handoff_reason="model_requested",
        handoff_detail="pedido_cliente",
        technical_data={"laudo_assinado": True, "tipo_amostra": "poço"},
        registration_data={"documento": "52998224725"},
        last_message_at=now,
    )
    baker.make(
        Message,
        session=session,
        direction=Direction.SYSTEM,
        message_type="state_changed",
        code=2,
        action="to_qualification",
        json_part={"from": "TRIAGE", "to": "QUALIFYING"},
        created_at=now - timedelta(minutes=3),
    )
    baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        agent="qualificacao",
        content="O prazo é de *5 dias úteis*. <script>alert(1)</script>",
        created_at=now - timedelta(minutes=2),
    )
    baker.make(
        HandoffSummary,
        session=session,
        error="provider_error: HTTP 500",
        collected_data={"laudo_assinado": False, "documento": "52998224725", "tipo_amostra": "rio"},
    )
    return session


def page_of(client: Client, session: Session) -> str:
    response = client.get(f"/admin/conversations/session/{session.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_handoff_reads_as_a_customer_asking_for_a_person(
    admin_client: Client, session: Session
) -> None:
    page = text_of(page_of(admin_client, session))

    assert "Motivo da transferência Cliente pediu um atendente" in page
    assert "pedido pelo modelo" not in page


def test_the_summary_error_is_a_pt_br_sentence(admin_client: Client, session: Session) -> None:
    page = text_of(page_of(admin_client, session))

    assert (
        "Não foi possível gerar o resumo por completo: O provedor do modelo respondeu com erro."
        in page
    )
    assert "provider_error" not in page


def test_an_event_is_a_sentence_not_its_codes(admin_client: Client, session: Session) -> None:
    page = page_of(admin_client, session)

    # The code is a technical detail, hidden from Support in the workspace.
    assert 'Mudou para Qualificação<span class="tech"> (código 2)</span>.</li>' in page
    assert "to_qualification" not in page
    assert "s=2" not in page


def test_collected_data_use_the_schema_labels_yes_no_and_the_cpf_punctuation(
    admin_client: Client, session: Session
) -> None:
    page = page_of(admin_client, session)

    assert (
        '<tr data-key="laudo_assinado"><th scope="row">Laudo assinado</th><td>sim</td></tr>' in page
    )
    summary = page[page.index('id="summary-collected-data"') :]
    summary = summary[: summary.index("</dd>")]
    # (PostgreSQL's jsonb orders the keys its own way.)
    assert sorted(re.findall(r"<th scope=\"row\">([^<]*)</th><td>([^<]*)</td>", summary)) == [
        ("Documento (CPF/CNPJ)", "529.982.247-25"),
        ("Laudo assinado", "não"),
        ("Tipo de amostra", "rio"),
    ]
    assert '<div class="readonly">529.982.247-25</div>' in page


def test_without_the_personal_data_permission_the_cpf_is_masked_with_its_punctuation(
    session: Session,
) -> None:
    page = page_of(client_of("Prompt editors"), session)

    assert '<div class="readonly">***.***.***-**</div>' in page
    assert "529.982.247-25" not in page
    assert "52998224725" not in page


def test_whatsapp_bold_is_bold_in_the_bubble_and_html_stays_text(
    admin_client: Client, session: Session
) -> None:
    page = page_of(client_of("Support"), session)

    assert (
        '<div class="text">O prazo é de <strong>5 dias úteis</strong>. '
        "&lt;script&gt;alert(1)&lt;/script&gt;</div>"
    ) in page
    assert "<script>alert(1)" not in page


def test_the_list_names_the_handoff_by_its_motive(admin_client: Client, session: Session) -> None:
    page = admin_client.get("/admin/conversations/session/").content.decode()

    assert '<td class="field-handoff">Cliente pediu um atendente</td>' in page


def test_the_message_log_shows_an_event_as_its_sentence(
    admin_client: Client, session: Session
) -> None:
    page = admin_client.get(
        f"/admin/conversations/message/?session__id__exact={session.pk}"
    ).content.decode()

    assert '<td class="field-short_content">Mudou para Qualificação (código 2).</td>' in page


def test_the_list_columns_are_narrow_enough_for_1366_pixels(
    admin_client: Client, session: Session
) -> None:
    session.instance.name = "Vale"
    session.instance.save()
    Session.objects.filter(pk=session.pk).update(
        segment="AMBIENTAL_E_SANEAMENTO", last_inbound_at="2026-03-11T15:04:00Z"
    )
    page = admin_client.get("/admin/conversations/session/").content.decode()

    assert '<td class="field-instance_name">Vale</td>' in page
    assert '<td class="field-segment_code">AMBIENTAL_<wbr>E_<wbr>SANEAMENTO</td>' in page
    assert '<td class="field-service_code">AGUA_<wbr>POTABILIDADE</td>' in page
    # Brasília time, short.
    assert '<td class="field-last_inbound">11/03/2026 12:04</td>' in page
    assert "Ana Lima (+55 11 91234-5678)" in page
    assert "support/admin/session_list.css" in page
