"""Demo conversations: recorded conversations that show the product on a developer's machine.

`demo_conversations_load` plays five scripted conversations through the real code — each
customer message is a synthetic webhook body applied by `webhook_delivery_receive`, each turn
runs `session_process` with the production collaborators (`build_pipeline_deps`), handoff
summaries come from `handoff_summary_generate`, the staff takeover from
`support.staff_actions` — with only two seams replaced:

- the model: `ScriptedLLM` answers each call with the next recorded answer of the conversation
  (a call beyond the script raises `DemoScriptError`, so a pipeline change that asks the model
  something new fails the generator instead of storing a different conversation);
- WhatsApp: `DemoSender` accepts every message with a wamid ``demo.<n>`` and never opens a
  connection.

So the rows follow the code as it changes (docs/development.md, Demo conversations): they are never
hand-written. The clock is one base moment (`demo_base_time`: 10:00 in São Paulo on the last weekday
before
`now`), so the same `now` always gives the same conversations; the out-of-hours conversation happens
at 21:30 of that day, when the default business hours are closed.

Every row of a conversation carries the conversation's clock. The turn and the staff actions
take it as their `now`; what the code stamps with the wall clock (a webhook's arrival and the
customer message it stores, a send, a model call, a summary, the session's creation, the
admin log) is moved to the step's instant after the step (`_Player.reclock`): the customer's
moment for an arrival, 20 seconds later for what answers it. Every demo instant is before the
load began, so a stamp at or after the step began is one of the wall clock's.

The demo customers use the reserved phones ``5511900000001``…``5511900000005`` (`DEMO_PHONES`):
loading is skipped while any of them has a session, and `demo_conversations_delete` removes
exactly those sessions (with their messages, calls, summaries and lead) and the webhook bodies
the generator stored, so a reset recreates the same content.
"""

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.business_hours import BUSINESS_TZ
from agents.llm import CallPurpose, ChatMessage, LLMCallResult
from agents.states import HandoffReason, SessionState
from conversations.agent_sources import DatabaseCallRecorder
from conversations.handoff import handoff_summary_generate, summary_due
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import (
    Direction,
    HandoffSummary,
    Instance,
    Lead,
    LLMCall,
    Message,
    Session,
    WebhookDelivery,
)
from conversations.sending import outbound_message_send
from conversations.turns.deps import PipelineConfig, no_read_receipt
from conversations.turns.run import session_process
from conversations.turns.tasks import build_pipeline_deps
from support.staff_actions import session_reply, session_take_over
from whatsapp.client import SentMessage

DEMO_PHONE_PREFIX = "55119000000"
DEMO_STAFF_USERNAME = "camila.demo"
# The demo catalog's instance (conversations/fixtures/demo.json).
DEMO_PHONE_NUMBER_ID = "100000000000001"
DEMO_WAMID_PREFIX = "demo."
# The webhook bodies the generator stores carry it, so a reset deletes them.
DEMO_USER_AGENT = "demo-conversations"
_WEEKDAYS = range(5)  # Monday..Friday


class DemoScriptError(Exception):
    """The code asked the model something the recording has no answer for (or left answers
    unused), or a conversation did not end as recorded: the script needs updating."""


class DemoWouldLeaveTheMachine(Exception):
    """A setting would send the demo's lead or handoff alerts out (CRM webhook, alert e-mails or
    webhook): the demo is not loaded rather than reach them."""


# Each would make the demo reach a real service after commit (support.crm, .alerts).
OUTSIDE_SETTINGS = ("CRM_WEBHOOK_URL", "HANDOFF_NOTIFY_EMAILS", "HANDOFF_WEBHOOK_URL")


def outside_settings_configured() -> list[str]:
    return [name for name in OUTSIDE_SETTINGS if getattr(settings, name)]


# --- The two seams --------------------------------------------------------------------------------


class ScriptedLLM:
    """An `LLMClient` that answers each call with the next recorded answer, in order."""

    def __init__(self, answers: Sequence[str], *, name: str) -> None:
        self.answers: deque[str] = deque(answers)
        self.name = name

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        if not self.answers:
            raise DemoScriptError(f"{self.name}: no recorded answer left for a {purpose} call")
        answer = self.answers.popleft()
        # Plausible, deterministic token counts (about four characters a token) for the admin.
        prompt_chars = len(instructions) + sum(len(m.content) for m in messages)
        return LLMCallResult(
            raw_response=answer,
            model=model,
            tokens_input=prompt_chars // 4,
            tokens_output=max(1, len(answer) // 4),
            latency_ms=800 + len(answer) * 5,
        )

    def finish(self) -> None:
        if self.answers:
            raise DemoScriptError(f"{self.name}: {len(self.answers)} recorded answer(s) unused")


class DemoSender:
    """A `WhatsAppSender` that accepts every message locally: wamids ``demo.1``, ``demo.2``…"""

    def __init__(self) -> None:
        self.sent = 0

    def _accept(self) -> SentMessage:
        self.sent += 1
        return SentMessage(wamid=f"{DEMO_WAMID_PREFIX}{self.sent}")

    def send_text(self, **_kwargs: Any) -> SentMessage:
        return self._accept()

    def send_template(self, **_kwargs: Any) -> SentMessage:
        return self._accept()

    def send_interactive(self, **_kwargs: Any) -> SentMessage:
        return self._accept()

    def media_upload(self, **_kwargs: Any) -> str:
        return f"{DEMO_WAMID_PREFIX}media.{self.sent + 1}"

    def send_media(self, **_kwargs: Any) -> SentMessage:
        return self._accept()

    def mark_read(self, **_kwargs: Any) -> None:
        return None


# --- The recordings ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Say:
    """The customer writes `text`, `minute` minutes after the conversation starts; or, with
    `tap`, taps the button of that id under the bot's last message (`text` is its title)."""

    text: str
    minute: int
    tap: str = ""


@dataclass(frozen=True, slots=True)
class StaffTakeOver:
    minute: int


@dataclass(frozen=True, slots=True)
class StaffReply:
    text: str
    minute: int


Step = Say | StaffTakeOver | StaffReply


@dataclass(frozen=True, slots=True)
class Recording:
    """One demo conversation: who, when (from the base time), what happens, and what the
    model answers — the agents' and repair calls in `answers`, the summary in `summary`."""

    key: str
    phone: str
    name: str
    start: timedelta
    steps: tuple[Step, ...]
    answers: tuple[str, ...]
    summary: dict[str, Any] | None = None


def _summary(**fields: Any) -> dict[str, Any]:
    return fields


LUCAS_CPF = "529.982.247-25"

RECORDINGS: tuple[Recording, ...] = (
    Recording(
        key="qualified_lead",
        phone=f"{DEMO_PHONE_PREFIX}01",
        name="Lucas Ferreira",
        start=timedelta(minutes=0),
        steps=(
            Say(
                "Bom dia! Preciso de um orçamento de análise de água do poço do nosso sítio.",
                0,
            ),
            Say("São 2 amostras: uma direto do poço e outra da caixa d'água. Fica em Valinhos.", 2),
            Say(f"Lucas Ferreira, CPF {LUCAS_CPF}", 4),
            Say("lucas.ferreira@example.com", 5),
            Say("Confirmar", 6, tap="confirmar"),
        ),
        answers=(
            '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vou te ajudar com o orçamento!',
            '{"s":1}Bom dia, Lucas! Fazemos sim a análise de potabilidade da água. '
            "Quantas amostras serão e de onde vem a água (poço, caixa d'água, rede pública)? "
            "Em que cidade fica o ponto de coleta?",
            '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
            '{"tipo_amostra":"poço e caixa d\'água","quantidade_amostras":2,'
            '"cidade_coleta":"Valinhos"}}',
            '{"s":1}Perfeito, são 2 amostras de água em Valinhos. Para registrar o pedido de '
            "orçamento, me informe seu nome completo e o CPF ou CNPJ.",
            '{"s":1,"cadastro":{"nome":"Lucas Ferreira","documento":"' + LUCAS_CPF + '"}}'
            "Obrigada, Lucas! Para qual e-mail enviamos a proposta?",
            '{"s":4,"cadastro":{"nome":"Lucas Ferreira","documento":"' + LUCAS_CPF + '",'
            '"email":"lucas.ferreira@example.com"}}Confira os dados, por favor:\n\n'
            "- **Nome:** Lucas Ferreira\n- **CPF:** " + LUCAS_CPF + "\n"
            "- **E-mail:** lucas.ferreira@example.com\n\nEstá tudo certo?",
            '{"s":5}Pedido registrado, Lucas! Nossa equipe comercial prepara a proposta da '
            "análise de potabilidade e envia para lucas.ferreira@example.com.",
        ),
        summary=_summary(
            motivo_encerramento="Cliente confirmou os dados do pedido de orçamento (código 5).",
            servico_identificado="Potabilidade da água",
            segmento="Meio ambiente (água, efluentes e solo)",
            pontos_chave=[
                "2 amostras: poço e caixa d'água de um sítio",
                "Coleta em Valinhos (SP)",
                "Cliente pessoa física; proposta por e-mail",
            ],
            dados_coletados={
                "tipo_amostra": "poço e caixa d'água",
                "quantidade_amostras": 2,
                "cidade_coleta": "Valinhos",
                "nome": "Lucas Ferreira",
                "documento": "52998224725",
                "email": "lucas.ferreira@example.com",
            },
            proxima_acao="Enviar a proposta de potabilidade (2 amostras) por e-mail e combinar "
            "a retirada dos frascos ou a coleta em Valinhos.",
            resumo_texto="Lucas Ferreira pediu orçamento de potabilidade para 2 amostras de água "
            "(poço e caixa d'água) de um sítio em Valinhos e confirmou nome, CPF e e-mail.",
        ),
    ),
    Recording(
        key="asks_for_a_person",
        phone=f"{DEMO_PHONE_PREFIX}02",
        name="Mariana Costa",
        start=timedelta(minutes=40),
        steps=(
            Say(
                "Bom dia. A empresa precisa de análise de efluente para renovar a licença de "
                "operação na CETESB.",
                0,
            ),
            Say(
                "É industrial. Mas prefiro falar com alguém do comercial, temos um contrato "
                "anual com particularidades.",
                3,
            ),
        ),
        answers=(
            '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vamos ver o seu caso.',
            '{"s":1}Bom dia, Mariana! Fazemos a análise de efluentes para lançamento, com laudo '
            "aceito nos processos da CETESB. O efluente é industrial, sanitário ou misto? "
            "Quantas amostras por campanha?",
            '{"s":98,"motivo":"pedido_cliente"}Claro, vou chamar alguém do comercial.',
        ),
        summary=_summary(
            motivo_encerramento="A cliente pediu para falar com o comercial.",
            servico_identificado="Efluentes para lançamento",
            segmento="Meio ambiente (água, efluentes e solo)",
            pontos_chave=[
                "Renovação da licença de operação na CETESB",
                "Efluente industrial",
                "Contrato anual com particularidades",
            ],
            dados_coletados={"tipo_efluente": "Industrial"},
            proxima_acao="Comercial: contatar Mariana sobre o contrato anual de efluentes e as "
            "campanhas de coleta.",
            resumo_texto="Mariana Costa precisa de análise de efluente industrial para renovar a "
            "licença de operação e pediu para falar com o comercial sobre o contrato anual.",
        ),
    ),
    Recording(
        key="out_of_hours",
        phone=f"{DEMO_PHONE_PREFIX}03",
        name="Roberto Almeida",
        start=timedelta(hours=11, minutes=30),  # 21:30: the default hours are closed
        steps=(
            Say(
                "Boa noite. Recebi o laudo da ração dos bovinos e a proteína bruta veio bem "
                "abaixo do que o fornecedor garante. Quero falar com o responsável técnico.",
                0,
            ),
        ),
        answers=('{"s":98,"motivo":"reclamacao"}Entendo, vou chamar o responsável técnico.',),
        summary=_summary(
            motivo_encerramento="Cliente contesta um resultado e pede o responsável técnico.",
            servico_identificado="Análise bromatológica de ração",
            segmento="Saúde e nutrição animal",
            pontos_chave=[
                "Laudo de ração para bovinos já emitido",
                "Proteína bruta abaixo do garantido pelo fornecedor",
                "Mensagem recebida fora do horário de atendimento",
            ],
            dados_coletados={},
            proxima_acao="Responsável técnico: revisar o laudo e retornar ao cliente no próximo "
            "dia útil.",
            resumo_texto="Roberto Almeida contesta o resultado de proteína bruta do laudo de "
            "ração para bovinos e pede contato do responsável técnico.",
        ),
    ),
    Recording(
        key="format_repair",
        phone=f"{DEMO_PHONE_PREFIX}04",
        name="Patrícia Gomes",
        start=timedelta(hours=1, minutes=15),
        steps=(
            Say(
                "Olá! Vocês fazem análise microbiológica de queijo? Tenho um pequeno laticínio "
                "em Amparo.",
                0,
            ),
        ),
        answers=(
            # The model wraps its answer in a Markdown fence: the strict parser refuses it and
            # the one repair call returns it in the {JSON}Mensagem contract.
            '```json\n{"s":2,"segmento":"ALIMENTOS","intencao":"ORCAMENTO"}\n```\n'
            "Vou te passar para a qualificação.",
            '{"s":2,"segmento":"ALIMENTOS","intencao":"ORCAMENTO"}'
            "Vou te passar para a qualificação.",
            '{"s":1}Olá, Patrícia! Fazemos sim a análise microbiológica de alimentos, incluindo '
            "queijos. Quais tipos de queijo e quantas amostras por lote você quer analisar? "
            "O produto é refrigerado?",
        ),
    ),
    Recording(
        key="staff_takeover",
        phone=f"{DEMO_PHONE_PREFIX}05",
        name="Fernanda Ribeiro",
        start=timedelta(hours=2),
        steps=(
            Say(
                "Boa tarde, sou da Prefeitura de Louveira. Precisamos investigar o solo de uma "
                "área de antigo lixão.",
                0,
            ),
            StaffTakeOver(4),
            StaffReply(
                "Olá, Fernanda! Aqui é a Camila, da equipe técnica. Para área de antigo lixão "
                "fazemos a investigação confirmatória de solo. Posso te ligar para definirmos "
                "os pontos de coleta?",
                6,
            ),
            Say("Pode sim, meu telefone é este mesmo. Obrigada!", 9),
        ),
        answers=(
            '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vamos ver isso.',
            '{"s":1}Olá, Fernanda! Fazemos investigação de solo contaminado. Quantas amostras '
            "vocês estimam e qual é a área aproximada, em hectares?",
        ),
    ),
)
DEMO_PHONES: tuple[str, ...] = tuple(r.phone for r in RECORDINGS)


# --- The use cases -------------------------------------------------------------------------------


def demo_base_time(now: datetime) -> datetime:
    """10:00 in São Paulo on the last weekday before `now`'s date there."""
    day: date = now.astimezone(BUSINESS_TZ).date() - timedelta(days=1)
    while day.weekday() not in _WEEKDAYS:
        day -= timedelta(days=1)
    return datetime.combine(day, time(10, 0), tzinfo=BUSINESS_TZ)


def demo_sessions() -> QuerySet[Session]:
    return Session.objects.filter(customer_phone__in=DEMO_PHONES)


@dataclass
class _Player:
    """Plays one recording. The load is one transaction, so no commit hook runs before its end:
    what the Celery tasks would do after each commit (run the turn, send the replies, write the
    summary) is done after each step from the rows themselves, as the sweeps would, and the
    enqueue seams do nothing (`_later`)."""

    recording: Recording
    base: datetime
    sender: DemoSender
    staff: User
    llm: ScriptedLLM = field(init=False)
    summary_llm: ScriptedLLM = field(init=False)
    said: int = 0

    def __post_init__(self) -> None:
        self.llm = ScriptedLLM(self.recording.answers, name=self.recording.key)
        summaries = [json.dumps(self.recording.summary, ensure_ascii=False)]
        self.summary_llm = ScriptedLLM(
            summaries if self.recording.summary else [], name=f"{self.recording.key} summary"
        )

    def at(self, minute: int) -> datetime:
        return self.base + self.recording.start + timedelta(minutes=minute)

    def play(self) -> None:
        for step in self.recording.steps:
            began = timezone.now()
            if isinstance(step, Say):
                self.say(step)
            elif isinstance(step, StaffTakeOver):
                session_take_over(
                    session_id=self.session().pk, user=self.staff, now=self.at(step.minute)
                )
            else:
                session_reply(
                    session_id=self.session().pk,
                    user=self.staff,
                    text=step.text,
                    form_token=UUID(int=len(self.recording.steps) * 1000 + step.minute),
                    now=self.at(step.minute),
                    send=_later,
                )
            self.after_commit()
            arrived = self.at(step.minute)
            answered = arrived + ANSWER_DELAY if isinstance(step, Say) else arrived
            self.reclock(began=began, arrived=arrived, answered=answered)
        self.llm.finish()
        self.summary_llm.finish()

    def session(self) -> Session:
        session: Session = demo_sessions().get(customer_phone=self.recording.phone)
        return session

    def say(self, step: Say) -> None:
        self.said += 1
        quoted = ""
        if step.tap:
            last = Message.objects.filter(session=self.session(), direction=Direction.OUTBOUND)
            quoted = last.order_by("-id").values_list("wa_message_id", flat=True).first() or ""
        webhook_delivery_receive(
            raw_body=webhook_body(
                self.recording,
                self.said,
                step.text,
                self.at(step.minute),
                tap=step.tap,
                quoted=quoted,
            ),
            headers={"Content-Type": "application/json", "User-Agent": DEMO_USER_AGENT},
            enqueue_turn=_later,
            enqueue_send=_later,
        )
        moment = self.at(step.minute) + ANSWER_DELAY
        deps = replace(
            build_pipeline_deps(llm=self.llm),
            send=_later,
            enqueue_summary=_later,
            mark_read=no_read_receipt,
            clock=lambda: moment,
        )
        session_process(
            session_id=self.session().pk, deps=deps, config=PipelineConfig.from_settings()
        )

    def after_commit(self) -> None:
        session = self.session()
        unsent = Message.objects.unsent_outbound().filter(session=session).order_by("id")
        for message_id in unsent.values_list("id", flat=True):
            outbound_message_send(
                message_id=message_id, client=self.sender, last_attempt=True, swept_later=False
            )
        if (
            session.state == SessionState.HUMAN
            and summary_due(HandoffReason(session.handoff_reason))
            and not session.summaries.exists()
        ):
            handoff_summary_generate(
                session_id=session.pk,
                llm=self.summary_llm,
                recorder=DatabaseCallRecorder(),
                model=settings.OPENAI_MODEL_SUMMARY,
            )

    def reclock(self, *, began: datetime, arrived: datetime, answered: datetime) -> None:
        """Move the wall-clock stamps this step wrote (at or after `began`) to the
        conversation's clock: `arrived` for a customer message's arrival, `answered` for the
        rest (see the module docstring)."""
        session = self.session()
        rows: list[QuerySet[Any]] = [
            Session.objects.filter(pk=session.pk),
            Message.objects.filter(session=session),
            WebhookDelivery.objects.filter(**{"headers__User-Agent": DEMO_USER_AGENT}),
            LLMCall.objects.filter(session=session),
            HandoffSummary.objects.filter(session=session),
            Lead.objects.filter(session=session),
            LogEntry.objects.filter(
                content_type=ContentType.objects.get_for_model(Session), object_id=str(session.pk)
            ),
        ]
        for queryset in rows:
            arrivals = ARRIVAL_FIELDS.get(queryset.model, frozenset())
            for column in queryset.model._meta.concrete_fields:
                if isinstance(column, models.DateTimeField):
                    at = arrived if column.name in arrivals else answered
                    queryset.filter(**{f"{column.name}__gte": began}).update(**{column.name: at})


# The model answers 20 seconds after the customer wrote.
ANSWER_DELAY = timedelta(seconds=20)
# The stamps of a customer message's arrival; every other stamp is of what answers it. A
# message written with the wall clock is the customer's (the turn and staff write on the clock).
ARRIVAL_FIELDS: dict[type[models.Model], frozenset[str]] = {
    Session: frozenset({"created_at"}),
    Message: frozenset({"created_at"}),
    WebhookDelivery: frozenset({"received_at", "processed_at"}),
}


def _later(_id: int) -> None:
    """The enqueue seams: the player does their work itself after each step (`_Player`)."""
    return None


def webhook_body(
    recording: Recording, index: int, text: str, at: datetime, *, tap: str = "", quoted: str = ""
) -> bytes:
    """The WhatsApp Cloud API body of one customer text, or of a tap on the reply button `tap`
    of the message `quoted` (the shape of a real delivery)."""
    message: dict[str, Any] = {
        "from": recording.phone,
        "id": f"wamid.demo.{recording.key}.{index}",
        "timestamp": str(int(at.timestamp())),
        "type": "text",
        "text": {"body": text},
    }
    if tap:
        del message["text"]
        message |= {
            "type": "interactive",
            "interactive": {"type": "button_reply", "button_reply": {"id": tap, "title": text}},
            "context": {"from": "551932000000", "id": quoted},
        }
    document = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "200000000000001",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "551932000000",
                                "phone_number_id": DEMO_PHONE_NUMBER_ID,
                            },
                            "contacts": [
                                {"profile": {"name": recording.name}, "wa_id": recording.phone}
                            ],
                            "messages": [message],
                        },
                    }
                ],
            }
        ],
    }
    return json.dumps(document, ensure_ascii=False, sort_keys=True).encode()


def demo_staff_user() -> User:
    """The fictitious staff member of the takeover: cannot log in (inactive, no password)."""
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(
        username=DEMO_STAFF_USERNAME,
        defaults={
            "first_name": "Camila",
            "last_name": "Demo",
            "is_staff": True,
            "is_active": False,
        },
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    assert isinstance(user, User)
    return user


def demo_conversations_delete() -> int:
    """Delete the demo sessions (and what cascades) and their webhook bodies; returns how many
    sessions were deleted."""
    with transaction.atomic():
        count = demo_sessions().count()
        demo_sessions().delete()
        # Kept, an identical body would be counted as a repeat and not applied again.
        WebhookDelivery.objects.filter(**{"headers__User-Agent": DEMO_USER_AGENT}).delete()
    return count


def demo_conversations_load(*, now: datetime, reset: bool = False) -> int:
    """Play the recordings (see the module docstring); returns how many sessions were created
    (0 when demo conversations exist and not `reset`).

    Raises `Instance.DoesNotExist` when the demo catalog is not loaded,
    `DemoWouldLeaveTheMachine` when a CRM or alert destination is configured, and
    `DemoScriptError` when the code and the recordings disagree.
    """
    if demo_sessions().exists() and not reset:
        return 0
    configured = outside_settings_configured()
    if configured:
        raise DemoWouldLeaveTheMachine(
            f"{', '.join(configured)} set: the demo's lead and handoffs would reach them"
        )
    demo_conversations_delete()
    Instance.objects.get(phone_number_id=DEMO_PHONE_NUMBER_ID, is_active=True)
    base = demo_base_time(now)
    sender = DemoSender()
    # All or nothing: a recording the code no longer follows leaves no half-loaded demo behind
    # (the model and WhatsApp are local here, so no transaction waits on the network).
    with transaction.atomic():
        staff = demo_staff_user()
        for recording in RECORDINGS:
            _Player(recording, base, sender, staff).play()
    return demo_sessions().count()
