"""The one format-repair call for an answer the strict parser refused (seed 000, DESIGN.md §8).

The repair asks a model (``OPENAI_MODEL_SUMMARY``, passed in) to do only what the seed allows:
remove text before the JSON, Markdown fences and stray whitespace, preserving the content, or
answer ``INVALID_FORMAT`` when there is no JSON to recover; and to drop an ``"opcoes"`` that
breaks its rule (the options only decorate the text, which then goes out as it is). Its answer
goes through the same strict parser; a repaired answer is then validated like any other. No
deterministic fix-up here: the parser stays strict and the repair is a model's, as the seed says.

Pure module: no Django import. The caller records the call (purpose ``repair``) and logs the
outcome (``llm_response_repair_success`` / ``_failed`` / ``_unavailable``).
"""

from dataclasses import dataclass

from agents.contract import (
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    LLMResponseParseError,
    ParsedLLMResponse,
    parse_llm_response,
)
from agents.llm import ChatMessage, LLMCallResult, LLMClient

INVALID_FORMAT = "INVALID_FORMAT"

REPAIR_INSTRUCTIONS = f"""\
Você corrige somente o FORMATO da resposta de outro assistente. Não responda ao cliente.

O formato correto é um objeto JSON seguido imediatamente do texto para o cliente, sem nada antes
do JSON: {{JSON}}Mensagem. Exemplo:
{{"s":1,"qualification_data":{{"tipo_amostra":"água"}}}}Quantas amostras serão analisadas?

A resposta a corrigir vem na mensagem do usuário. Faça exclusivamente isto:
- remova qualquer texto antes do objeto JSON;
- remova cercas de código Markdown (```, ```json) em volta do JSON ou da resposta;
- remova espaços e quebras de linha indevidos antes do JSON e entre o JSON e a mensagem.

Se o JSON tiver o campo "opcoes" fora da regra (uma lista de no máximo {MAX_OPTIONS} textos
curtos, de até {MAX_OPTION_CHARS} caracteres, sem textos vazios nem repetidos), remova o campo
"opcoes" inteiro.

Preserve todo o resto exatamente como está: as chaves e os valores do JSON, o código "s" e o texto
da mensagem, sem traduzir, resumir, completar, inventar ou corrigir conteúdo.

Responda apenas com a resposta corrigida, sem comentários. Se não houver um objeto JSON
recuperável com o campo "s" inteiro, responda exatamente {INVALID_FORMAT}."""


@dataclass(frozen=True, slots=True)
class RepairResult:
    """The repair call and its outcome: `parsed` when the repaired answer parses."""

    call: LLMCallResult
    parsed: ParsedLLMResponse | None
    error: str = ""


def repair_llm_response(*, llm: LLMClient, model: str, raw_response: str) -> RepairResult:
    """Ask `model` to fix the format of `raw_response`; raises `LLMError` when the call fails."""
    call = llm.chat(
        model=model,
        instructions=REPAIR_INSTRUCTIONS,
        messages=[ChatMessage(role="user", content=raw_response)],
        purpose="repair",
    )
    if call.raw_response.strip() == INVALID_FORMAT:
        return RepairResult(call=call, parsed=None, error="the repair answered INVALID_FORMAT")
    try:
        parsed = parse_llm_response(call.raw_response)
    except LLMResponseParseError as exc:
        return RepairResult(call=call, parsed=None, error=f"repaired answer: {exc}")
    return RepairResult(call=call, parsed=parsed)
