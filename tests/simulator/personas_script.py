"""The scripted model of the simulated customers' tests and bench: one function answers every
request to the fake OpenAI server from what the request carries, so the draft's own text decides
what the collection agent answers.

Models tell the callers apart: the customer (`PERSONA_MODEL`), each agent, and the summary. A
draft whose text holds `BROKEN_MARKER` answers code 4 with no registration (outside the contract);
any other collection prompt leads the customer to a confirmed request in four messages."""

from typing import Any

from tests.helpers.model_requests import history_of

PERSONA_MODEL = "gpt-4.1-nano"
TRIAGE_MODEL = "gpt-4o-mini"
QUALIFICATION_MODEL = "gpt-4.1-mini"
COLLECTION_MODEL = "gpt-4.1"
SUMMARY_MODEL = "gpt-4o"
GOOD_DRAFT = "RASCUNHO BOM da coleta de {{ agent_name }}: peça nome, CPF e e-mail."
BROKEN_MARKER = "RASCUNHO QUEBRADO"
BROKEN_DRAFT = f"{BROKEN_MARKER} da coleta de {{{{ agent_name }}}}: confirme sem dados."
HUMAN_MARKER = "quer falar com uma pessoa"
# The settings that give each caller its own model.
MODEL_SETTINGS = {
    "OPENAI_MODEL_PERSONA": PERSONA_MODEL,
    "OPENAI_MODEL_TRIAGE": TRIAGE_MODEL,
    "OPENAI_MODEL_QUALIFICATION": QUALIFICATION_MODEL,
    "OPENAI_MODEL_COLLECTION": COLLECTION_MODEL,
    "OPENAI_MODEL_SUMMARY": SUMMARY_MODEL,
}
FARMER = (
    "Produtor rural com poço, quer orçamento de potabilidade para 2 amostras, responde curto, "
    "manda o CPF só quando pedido."
)
WANTS_HUMAN = f"Cliente irritado que {HUMAN_MARKER} logo na primeira mensagem."

FIRST = "Oi, quero um orçamento de potabilidade"
SAMPLES = "2 amostras de poço"
REGISTRATION = "Ana Lima, CPF 529.982.247-25, ana@example.com"
HUMAN = "Quero falar com uma pessoa"
ASK_SAMPLES = "Quantas amostras e de onde?"
ASK_DATA = "Qual o seu nome, CPF e e-mail?"
CONFIRM_TEXT = "Confere: Ana Lima, CPF 529.982.247-25, ana@example.com?"
DONE_TEXT = "Perfeito, Ana! Seu pedido foi registrado."
ROUTE = '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}'
TO_COLLECTION = (
    '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
    '{"tipo_amostra":"poço","quantidade_amostras":2}}'
)
CODE_4 = (
    '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"52998224725","email":"ana@example.com"}}'
    + CONFIRM_TEXT
)


def catalog_create() -> None:
    """What the conversations need besides the model: the water service's catalog, the
    handoff message, and the demo instance."""
    # Imported here: bench/personas.py imports this module before Django is set up.
    from knowledge_base.models import Intent, Segment, Service
    from prompts_admin.models import RuntimeConfig
    from tests import baker_recipes as recipes
    from tests.helpers.pipeline import OPEN_TEXT, WATER_SCHEMA

    ambiental = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(
        code="AGUA_POTABILIDADE",
        label="Potabilidade da água",
        segment=ambiental,
        parameter_schema=WATER_SCHEMA,
    )
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = OPEN_TEXT
    config.save()
    recipes.instance.make()


def world_prepare(settings: Any, model: Any) -> None:
    """The tests' world: one model per caller (`settings`: pytest-django's fixture), a cost cap
    of 1 USD, the catalog (`catalog_create`), and the fake OpenAI server `model` answering
    with this script."""
    for name, value in MODEL_SETTINGS.items():
        setattr(settings, name, value)
    settings.REPLAY_MAX_COST_USD = 1.0
    catalog_create()
    model.answer_with(answer)


def _last(body: dict[str, Any], role: str) -> str:
    texts = [str(i.get("content")) for i in history_of(body) if i.get("role") == role]
    return texts[-1] if texts else ""


def customer(body: dict[str, Any]) -> str:
    bot = _last(body, "user")
    if "A conversa ainda não começou" in bot:
        return HUMAN if HUMAN_MARKER in body["instructions"] else FIRST
    if ASK_SAMPLES in bot:
        return SAMPLES
    if ASK_DATA in bot:
        return REGISTRATION
    if "Confere" in bot:
        return "Confirmar"
    return "[FIM]"


def answer(body: dict[str, Any]) -> str | None:
    model = body["model"]
    said = _last(body, "user")
    if model == PERSONA_MODEL:
        return customer(body)
    if model == SUMMARY_MODEL:
        return '{"motivo_encerramento": "Pedido confirmado", "resumo_texto": "ok"}'
    if model == TRIAGE_MODEL:
        return '{"s":98,"motivo":"pedido_cliente"}' if HUMAN in said else ROUTE
    if model == QUALIFICATION_MODEL:
        return TO_COLLECTION if SAMPLES in said else '{"s":1}' + ASK_SAMPLES
    if model == COLLECTION_MODEL:
        if BROKEN_MARKER in body["instructions"]:
            return '{"s":4}' + CONFIRM_TEXT
        if REGISTRATION in said:
            return CODE_4
        if "Confirmar" in said:
            return '{"s":5}' + DONE_TEXT
        return '{"s":1}' + ASK_DATA
    return None
