"""The operational summary written for the human team at a handoff (DESIGN.md §10, seed 000).

A separate call with ``OPENAI_MODEL_SUMMARY`` that returns pure JSON — not `{JSON}Mensagem`, no
``s`` — with seven fields: ``motivo_encerramento``, ``servico_identificado``, ``segmento``,
``pontos_chave`` (list of text), ``dados_coletados`` (object), ``proxima_acao``, ``resumo_texto``.

`parse_operational_summary` is deliberately tolerant, unlike the contract parser: it strips
Markdown fences and any text around the object, normalises types (a text where a list was
expected becomes a list of its lines; numbers become text; a non-object ``dados_coletados`` is
wrapped) and fills every missing field from `defaults`. It never raises: on garbage it returns the
defaults with `error` set, so a summary failure never blocks or undoes a handoff.

Pure module: no Django import; the caller records the call and stores the result.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agents.llm import ChatMessage, LLMCallResult, LLMClient

MAX_KEY_POINTS = 20
MAX_TEXT_CHARS = 4_000
_BULLETS = ("- ", "* ", "\u2022 ", "\u2013 ")  # hyphen, asterisk, bullet, en dash

SUMMARY_INSTRUCTIONS = """\
Você escreve o resumo operacional de um atendimento de WhatsApp de um laboratório, para a equipe
humana que vai assumir a conversa agora. Leia os dados da sessão e a conversa enviados pelo
usuário e responda SOMENTE com um objeto JSON, sem texto antes ou depois e sem cercas Markdown,
com exatamente estes campos:

{"motivo_encerramento": "por que o atendimento automático terminou",
 "servico_identificado": "código e nome do serviço, ou vazio se não houver",
 "segmento": "código do segmento, ou vazio",
 "pontos_chave": ["fatos importantes da conversa, um por item"],
 "dados_coletados": {"campo": "valor"},
 "proxima_acao": "o que a equipe deve fazer primeiro",
 "resumo_texto": "um parágrafo curto que a equipe lê em segundos"}

Regras: escreva em português do Brasil; use apenas o que está nos dados e na conversa, sem
inventar; não inclua o campo "s"; não prometa prazos; em dados_coletados copie os dados técnicos e
cadastrais exatamente como vieram."""


@dataclass(frozen=True, slots=True)
class OperationalSummary:
    """The summary, in English attribute names; `to_payload()` gives the pt-BR field names."""

    closing_reason: str = ""
    identified_service: str = ""
    segment: str = ""
    key_points: tuple[str, ...] = ()
    collected_data: Mapping[str, Any] = field(default_factory=dict)
    next_action: str = ""
    summary_text: str = ""
    # Empty when the model's JSON was read; otherwise what went wrong (the defaults are kept).
    error: str = ""

    def to_payload(self) -> dict[str, Any]:
        return {
            "motivo_encerramento": self.closing_reason,
            "servico_identificado": self.identified_service,
            "segmento": self.segment,
            "pontos_chave": list(self.key_points),
            "dados_coletados": dict(self.collected_data),
            "proxima_acao": self.next_action,
            "resumo_texto": self.summary_text,
        }


_ATTRIBUTE_OF: dict[str, str] = {
    "motivo_encerramento": "closing_reason",
    "servico_identificado": "identified_service",
    "segmento": "segment",
    "pontos_chave": "key_points",
    "dados_coletados": "collected_data",
    "proxima_acao": "next_action",
    "resumo_texto": "summary_text",
}
SUMMARY_FIELDS: tuple[str, ...] = tuple(_ATTRIBUTE_OF)


@dataclass(frozen=True, slots=True)
class TranscriptLine:
    """One message of the conversation as the summary sees it."""

    author: str  # "cliente", "assistente", "equipe" or "sistema"
    text: str


@dataclass(frozen=True, slots=True)
class SummaryFacts:
    """What the summary is written from: the session's facts and its conversation."""

    handoff_reason: str
    handoff_detail: str = ""
    customer_name: str = ""
    customer_phone: str = ""
    segment: str = ""
    intent: str = ""
    service: str = ""
    technical_data: Mapping[str, Any] = field(default_factory=dict)
    registration_data: Mapping[str, Any] = field(default_factory=dict)
    transcript: Sequence[TranscriptLine] = ()

    def fallback(self) -> OperationalSummary:
        """The minimal summary made of the facts alone, used for every field the model omits."""
        return OperationalSummary(
            closing_reason=" — ".join(p for p in (self.handoff_reason, self.handoff_detail) if p),
            identified_service=self.service,
            segment=self.segment,
            collected_data={**self.technical_data, **self.registration_data},
        )


@dataclass(frozen=True, slots=True)
class SummaryGeneration:
    summary: OperationalSummary
    call: LLMCallResult


def build_summary_input(facts: SummaryFacts) -> str:
    """The user message of the summary call: the facts as JSON, then the conversation."""
    session = {
        "motivo_handoff": facts.handoff_reason,
        "detalhe_handoff": facts.handoff_detail,
        "nome_cliente": facts.customer_name,
        "telefone_cliente": facts.customer_phone,
        "segmento": facts.segment,
        "intencao": facts.intent,
        "servico": facts.service,
        "dados_tecnicos": dict(facts.technical_data),
        "cadastro": dict(facts.registration_data),
    }
    lines = "\n".join(f"{line.author}: {line.text}" for line in facts.transcript)
    return (
        f"Dados da sessão:\n{json.dumps(session, ensure_ascii=False, indent=1)}\n\n"
        f"Conversa:\n{lines or '(sem mensagens)'}"
    )


def generate_operational_summary(
    *, llm: LLMClient, model: str, facts: SummaryFacts
) -> SummaryGeneration:
    """Call `model` for the summary and parse it; raises `LLMError` when the call fails."""
    call = llm.chat(
        model=model,
        instructions=SUMMARY_INSTRUCTIONS,
        messages=[ChatMessage(role="user", content=build_summary_input(facts))],
        purpose="summary",
    )
    summary = parse_operational_summary(call.raw_response, defaults=facts.fallback())
    return SummaryGeneration(summary=summary, call=call)


# --- The tolerant parser -------------------------------------------------------------------


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        first_newline = text.find("\n")
        text = text[first_newline + 1 :] if first_newline != -1 else text[3:]
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def _load_object(raw: str) -> dict[str, Any]:
    text = _strip_fences(raw)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        # Tolerated here (not in the contract): prose around the object.
        start, end = text.find("{"), text.rfind("}")
        if start == -1 or end <= start:
            raise ValueError("no JSON object in the answer") from None
        try:
            value = json.loads(text[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"malformed JSON: {exc.msg} (char {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"the answer is a JSON {type(value).__name__}, not an object")
    return value


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        text = value.strip()
    elif isinstance(value, bool):
        text = "sim" if value else "não"
    elif isinstance(value, int | float):
        text = str(value)
    elif isinstance(value, list):
        text = "; ".join(t for t in (_as_text(v) for v in value) if t)
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text[:MAX_TEXT_CHARS]


def _as_points(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items: list[Any] = value.splitlines()
    elif isinstance(value, list):
        items = value
    elif isinstance(value, dict):
        items = [f"{k}: {_as_text(v)}" for k, v in value.items()]
    else:
        items = [value]
    points = []
    for item in items:
        text = _as_text(item)
        for bullet in _BULLETS:
            text = text.removeprefix(bullet)
        if text.strip():
            points.append(text.strip())
    return tuple(points[:MAX_KEY_POINTS])


def _as_object(value: Any) -> dict[str, Any]:
    if value is None or value == "" or value == []:
        return {}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return {"valor": value}


_NORMALISERS = {
    "pontos_chave": _as_points,
    "dados_coletados": _as_object,
}


def parse_operational_summary(
    raw: str, *, defaults: OperationalSummary | None = None
) -> OperationalSummary:
    """Read the summary JSON leniently; never raises (see the module docstring)."""
    base = defaults or OperationalSummary()
    try:
        obj = _load_object(raw if isinstance(raw, str) else "")
    except ValueError as exc:
        return replace(base, error=f"invalid summary: {exc}")
    values: dict[str, Any] = {}
    for key in SUMMARY_FIELDS:
        if key not in obj:
            continue
        value = _NORMALISERS.get(key, _as_text)(obj[key])
        if value:
            values[_ATTRIBUTE_OF[key]] = value
    if not values:
        return replace(base, error="invalid summary: none of the summary fields was filled")
    return replace(base, error="", **values)
