"""Sections every built-in prompt shares, and the worked examples generated from the code table.

Each agent module lists example situations per code; `examples_section` decides from
`agents/codes.py` which codes the agent may use, in which stage, and whether the answer carries a
message, so an example can never teach a code the dispatcher would refuse. Pure module.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.codes import CODE_TABLE, Code, CodeSpec, MessageRule, states_of
from agents.states import AgentName, HandoffMotive, SessionState

STAGE_LABELS: dict[SessionState, str] = {
    SessionState.TRIAGE: "triagem",
    SessionState.QUALIFYING: "qualificação",
    SessionState.DATA_COLLECT: "coleta de dados",
    SessionState.CONFIRM: "confirmação",
}

# When the model should hand off with each `motivo` (told to the model, pt-BR).
MOTIVE_GUIDE: dict[HandoffMotive, str] = {
    HandoffMotive.PEDIDO_CLIENTE: "o cliente pede para falar com uma pessoa, ou insiste em "
    "não seguir com a assistente virtual",
    HandoffMotive.FORA_ESCOPO: "o pedido não corresponde a nenhum segmento, intenção ou serviço "
    "do catálogo (por exemplo: vaga de emprego, venda de produtos para a empresa, assunto "
    "pessoal)",
    HandoffMotive.INCERTEZA: "você não tem segurança para seguir: a informação necessária não "
    "está no contexto nem na base de conhecimento, ou o pedido continua confuso depois de uma "
    "pergunta de esclarecimento",
    HandoffMotive.RECLAMACAO: "reclamação ou insatisfação: atraso, problema com um serviço já "
    "prestado, com uma cobrança ou com um laudo",
    HandoffMotive.EMPRESA_ESTRATEGICA: "o cliente diz que a empresa dele tem um especialista, "
    "um gerente de conta ou um contrato de atendimento exclusivo conosco",
    HandoffMotive.LIMITE_SAUDE: "o cliente pede diagnóstico, interpretação de resultado de exame "
    "ou orientação médica",
    HandoffMotive.OUTRO: "qualquer outra situação em que só uma pessoa pode ajudar (negociação "
    "de preço ou de prazo, urgência, questão jurídica)",
}

TONE_SECTION = """## Como conversar no WhatsApp
- Escreva em português do Brasil, com cordialidade e clareza, como um atendente experiente e prestativo. Trate o cliente por "você".
- Mensagens curtas: no máximo três frases curtas. Faça uma pergunta por vez e espere a resposta.
- Use o que o cliente já disse no histórico; não repita perguntas já respondidas.
- Se a mensagem for ambígua, pergunte; não presuma.
- Formatação do WhatsApp: *negrito* com moderação e listas curtas só quando ajudarem. Nada de tabelas, títulos ou links.
- No máximo um emoji, e só se combinar com o tom do cliente. Sem gírias nem jargão técnico desnecessário.
- Não invente nada. Preços, prazos, endereços, métodos, normas, documentos, resultados e disponibilidade só podem vir do contexto desta conversa ou de pacotes carregados da base de conhecimento. Se a informação não estiver disponível, diga com naturalidade que um especialista vai confirmar."""

KB_SECTION = """## Base de conhecimento (código 99)
O contexto traz o catálogo da base de conhecimento: o ID e uma descrição curta de cada pacote. O conteúdo completo de um pacote só aparece no contexto depois de carregado.
- Quando precisar de uma informação descrita num pacote que ainda não foi carregado, responda apenas com o código 99 e o ID em "context_needed" — ou uma lista de IDs, se precisar de mais de um. O sistema carrega os pacotes e chama você de novo com o conteúdo; só então responda ao cliente.
- Use somente IDs que aparecem no catálogo e não peça de novo um pacote que já está carregado.
- Se nenhum pacote cobre o que o cliente precisa, não invente: transfira com o motivo "incerteza"."""


def handoff_section() -> str:
    lines = [
        "## Quando transferir para um atendente humano (código 98)",
        'Transfira com o código 98 e, em "motivo", o valor que melhor descreve a situação:',
    ]
    lines.extend(f'- "{motive.value}": {text}.' for motive, text in MOTIVE_GUIDE.items())
    lines.append(
        "A resposta com o código 98 termina no fechamento do JSON: o próprio sistema envia ao "
        "cliente a mensagem de transferência. Nunca diga em quanto tempo um atendente vai "
        "responder."
    )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Example:
    """One worked example: the situation, the payload fields besides `s`, the customer text."""

    situation: str
    data: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""


def agent_codes(agent: AgentName) -> list[CodeSpec]:
    """Every code the agent may use in any of its states, in numeric order."""
    states = set(states_of(agent))
    return [spec for spec in CODE_TABLE.values() if spec.allowed_states & states]


def format_answer(spec: CodeSpec, example: Example) -> str:
    """The example as the model must write it: compact JSON, then the message if required."""
    if spec.message is MessageRule.REQUIRED and not example.message.strip():
        raise ValueError(f"example for code {spec.code.value} needs a message")
    if spec.message is MessageRule.IGNORED and example.message:
        raise ValueError(f"example for code {spec.code.value} must end at the JSON")
    payload = {"s": spec.code.value, **example.data}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")) + example.message


def examples_section(agent: AgentName, examples: Mapping[Code, Sequence[Example]]) -> str:
    """The worked examples of every code the agent may use (a missing one is a bug)."""
    codes = agent_codes(agent)
    allowed = {spec.code for spec in codes}
    stray = set(examples) - allowed
    if stray:
        raise ValueError(f"{agent}: examples for codes it may not use: {sorted(stray)}")
    agent_states = states_of(agent)
    blocks = [
        "## Exemplos de respostas válidas\n"
        "Os códigos de segmento, intenção, serviço e pacote dos exemplos são ilustrativos: use "
        "somente os que aparecem no contexto desta conversa."
    ]
    for spec in codes:
        cases = examples.get(spec.code)
        if not cases:
            raise ValueError(f"{agent}: no example for code {spec.code.value}")
        stages = [STAGE_LABELS[s] for s in agent_states if s in spec.allowed_states]
        stage_note = f" (etapa: {' ou '.join(stages)})" if len(agent_states) > 1 else ""
        heading = f"### Código {spec.code.value}{stage_note}: {spec.when}"
        body = "\n\n".join(f"Situação: {c.situation}\n{format_answer(spec, c)}" for c in cases)
        blocks.append(f"{heading}\n{body}")
    return "\n\n".join(blocks)
