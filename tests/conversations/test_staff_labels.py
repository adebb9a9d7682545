"""What staff read, rendered when shown (conversations.labels, conversations.admin.display):
SYSTEM events from their codes and parameters, handoff reasons and details, summary errors,
collected values, CPF/CNPJ and WhatsApp's bold. Pure rendering: no database."""

from typing import Any

import pytest

from conversations.admin.display import format_data_value, format_document, whatsapp_html
from conversations.labels import (
    event_text,
    handoff_explanation,
    handoff_label,
    message_origin,
    state_label,
    summary_closing_reason_text,
    summary_error_text,
)
from conversations.models import Direction, Message


def system(message_type: str, **fields: Any) -> Message:
    return Message(direction=Direction.SYSTEM, message_type=message_type, **fields)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            system(
                "state_changed",
                code=2,
                action="to_qualification",
                json_part={"from": "TRIAGE", "to": "QUALIFYING"},
            ),
            "Mudou para Qualificação (código 2).",
        ),
        (
            system("state_changed", json_part={"from": "CONFIRM", "to": "DATA_COLLECT"}),
            "Mudou para Coleta de dados.",
        ),
        (
            system("context_loaded", code=99, json_part={"packages": ["PRAZOS", "COMPANY_INFO"]}),
            "Base de conhecimento: pacotes carregados: PRAZOS, COMPANY_INFO.",
        ),
        (
            system("data_rejected", json_part={"cadastro.email": {"error": "email inválido"}}),
            "Valores recusados (não gravados): cadastro.email (email inválido).",
        ),
        (
            system("lead_created", code=5),
            "Solicitação confirmada pelo cliente e registrada para a equipe.",
        ),
        (
            system("confirmation_changed", code=5, json_part={"changed": ["cadastro.email"]}),
            "Confirmação (código 5) com dados cadastrais diferentes dos mostrados ao cliente "
            "(cadastro.email): nada registrado; nova confirmação pedida.",
        ),
        (
            system("session_closed", code=8, json_part={"from": "TRIAGE", "to": "CLOSED"}),
            "Conversa encerrada pela assistente (código 8).",
        ),
        (
            system("session_closed", action="idle", json_part={"idle_hours": 24}),
            "Conversa encerrada por inatividade: o cliente voltou depois de 24 h.",
        ),
        (
            system(
                "handoff",
                action="model_requested",
                json_part={
                    "reason": "model_requested",
                    "detail": "pedido_cliente",
                    "motive": "pedido_cliente",
                },
            ),
            "Transferido para atendimento humano: cliente pediu um atendente.",
        ),
        (
            system(
                "handoff",
                action="llm_invalid_json",
                json_part={
                    "reason": "llm_invalid_json",
                    "detail": "triagem: text before the JSON: the answer must start with '{'",
                    "motive": "",
                },
            ),
            "Transferido para atendimento humano: resposta do modelo em formato inválido. "
            "A resposta do modelo não pôde ser lida, nem depois de uma tentativa de correção.",
        ),
        (
            system("handoff", action="staff_takeover"),
            "Atendimento assumido pela equipe pelo app WhatsApp Business.",
        ),
        (
            system(
                "identity_changed",
                action="user_changed_number",
                content="User A changed from 5511900000001 to 5511900000002",
            ),
            "O cliente trocou de número no WhatsApp "
            "(User A changed from 5511900000001 to 5511900000002).",
        ),
        (
            system("timestamp_replaced", json_part={"value": "'253402300799'"}),
            "Horário informado pelo WhatsApp ('253402300799') fora do intervalo aceito: "
            "usado o horário de recebimento.",
        ),
        (
            system("turn_failed", json_part={"error": "KeyError('x')", "error_type": "KeyError"}),
            "Erro inesperado ao responder o cliente (KeyError); a mensagem será processada "
            "de novo.",
        ),
    ],
)
def test_a_system_event_reads_as_a_pt_br_sentence(message: Message, expected: str) -> None:
    assert event_text(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # Written before the events carried their parameters: the stored text, as it is.
        (
            system("state_changed", code=2, content="Triagem → Qualificação (código 2)"),
            "Triagem → Qualificação (código 2)",
        ),
        (system("agent_routed", content="triagem → qualificacao"), "triagem → qualificacao"),
        (system("something_new"), "something_new"),
    ],
)
def test_an_old_row_or_an_unknown_code_shows_what_it_stored(
    message: Message, expected: str
) -> None:
    assert event_text(message) == expected


@pytest.mark.parametrize(
    ("reason", "detail", "label", "explanation"),
    [
        ("model_requested", "pedido_cliente", "cliente pediu um atendente", ""),
        ("model_requested", "reclamacao", "reclamação", ""),
        (
            "model_requested",
            "",
            "transferida pela assistente",
            "",
        ),
        (
            "llm_provider_error",
            "triagem: provider_error: HTTP 500",
            "erro do provedor do modelo",
            "O provedor do modelo respondeu com erro, ou o turno falhou várias vezes seguidas.",
        ),
        (
            "llm_timeout",
            "triagem: timeout",
            "tempo esgotado no modelo",
            "O modelo não respondeu a tempo.",
        ),
        (
            "strategic_company",
            "Acme Ltda",
            "empresa estratégica",
            "Empresa da lista estratégica: Acme Ltda.",
        ),
        ("qualified_lead", "", "lead qualificado", ""),
        ("", "", "", ""),
    ],
)
def test_a_handoff_reads_by_its_reason_and_motive(
    reason: str, detail: str, label: str, explanation: str
) -> None:
    assert handoff_label(reason, detail) == label
    assert handoff_explanation(reason, detail) == explanation


def test_a_state_label_is_translated_and_an_unknown_state_kept() -> None:
    assert (state_label("HUMAN"), state_label("GONE")) == ("Com humano", "GONE")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("provider_error: HTTP 500", "O provedor do modelo respondeu com erro."),
        ("timeout: read timed out", "O modelo não respondeu a tempo."),
        (
            "quota_exceeded: insufficient_quota",
            "O provedor do modelo recusou a chamada: cota esgotada.",
        ),
        (
            "invalid summary: none of the summary fields was filled",
            "A resposta do modelo não era um resumo válido.",
        ),
        ("something else", "something else"),
        ("", ""),
    ],
)
def test_a_summary_error_reads_as_a_pt_br_sentence(error: str, expected: str) -> None:
    assert summary_error_text(error) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("52998224725", "529.982.247-25"),
        ("529.982.247-25", "529.982.247-25"),
        ("11222333000181", "11.222.333/0001-81"),
        ("***********", "***.***.***-**"),
        ("**************", "**.***.***/****-**"),
        ("1234", "1234"),
    ],
)
def test_cpf_and_cnpj_are_shown_with_their_punctuation_masked_or_not(
    value: str, expected: str
) -> None:
    assert format_document(value) == expected


@pytest.mark.parametrize(
    ("value", "key", "expected"),
    [
        (True, "laudo_assinado", "sim"),
        (False, "laudo_assinado", "não"),
        (None, "x", "—"),
        (3, "quantidade", "3"),
        ({"a": "á"}, "x", '{"a": "á"}'),
        ("52998224725", "documento", "529.982.247-25"),
        ("52998224725", "observacao", "52998224725"),
    ],
)
def test_a_collected_value_reads_as_staff_expect(value: Any, key: str, expected: str) -> None:
    assert format_data_value(value, key) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("O prazo é de *5 dias úteis*.", "O prazo é de <strong>5 dias úteis</strong>."),
        ("*a* e *b*", "<strong>a</strong> e <strong>b</strong>"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("a*b*c", "a*b*c"),
        ("* item\n* outro", "* item\n* outro"),
        ("**", "**"),
        (
            "*<script>alert(1)</script>*",
            "<strong>&lt;script&gt;alert(1)&lt;/script&gt;</strong>",
        ),
        ('<b onclick="x">oi</b>', "&lt;b onclick=&quot;x&quot;&gt;oi&lt;/b&gt;"),
    ],
)
def test_whatsapp_bold_is_bold_and_everything_else_escaped(text: str, expected: str) -> None:
    assert whatsapp_html(text) == expected


@pytest.mark.parametrize(
    ("closing_reason", "expected"),
    [
        (
            "llm_timeout — triagem: read timed out",
            "Tempo esgotado no modelo. O modelo não respondeu a tempo.",
        ),
        ("model_requested — pedido_cliente", "Cliente pediu um atendente"),
        ("qualified_lead", "Lead qualificado"),
        ("Cliente pediu orçamento", "Cliente pediu orçamento"),
    ],
)
def test_the_minimal_summarys_closing_reason_reads_as_the_handoff(
    closing_reason: str, expected: str
) -> None:
    assert summary_closing_reason_text(closing_reason) == expected


@pytest.mark.parametrize(
    ("code", "action", "expected"),
    [
        (1, "respond", "código 1"),
        (None, "llm_timeout", "texto fixo de transferência"),
        (None, "unsupported_media", "resposta a mídia não suportada"),
        (None, "", ""),
        (None, "other", "other"),
    ],
)
def test_a_bubble_says_where_its_text_came_from(
    code: int | None, action: str, expected: str
) -> None:
    assert message_origin(code, action) == expected
