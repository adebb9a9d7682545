"""The harness of the turn tests (tests/conversations/turns/): the pipeline with its collaborators,
the sessions and messages a turn starts from, the reads the assertions use.

The real invoker, prompt assembly, history, recorder and catalog run; only the model is faked, by
an in-process `FakeLLM` (tests/helpers/fake_collaborators.py) whose calls are asserted exactly.
"""

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from agents.llm import LLMError
from agents.states import SessionState
from conversations.models import Direction, Instance, LLMCall, Message, Session
from conversations.turns.deps import PipelineConfig, PipelineDeps
from conversations.turns.run import ProcessReport, session_process
from tests import baker_recipes as recipes
from tests.helpers import conversation_rows
from tests.helpers.fake_collaborators import NOW, FakeLLM

S = SessionState
CUSTOMER_PHONE = "5511988887777"
VALID_CPF = "52998224725"
OPEN_TEXT = "Vou transferir você para um especialista da equipe."
CLOSED_TEXT = "Estamos fora do horário; a equipe continua por aqui quando retomarmos."
INVALID_FORMAT_TEXT = "Tive um problema para processar sua mensagem. Vou transferir você."
SUMMARY_MODEL = "model-summary"


# --- Harness ---------------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """The pipeline with its collaborators: the real ones, a fake model and recording seams."""

    llm: FakeLLM
    sent: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    config: PipelineConfig = field(
        default_factory=lambda: PipelineConfig(
            max_agent_hops=3,
            max_enrichments=2,
            repair_model=SUMMARY_MODEL,
            lease_ttl=timedelta(minutes=3),
        )
    )
    clock: Any = lambda: NOW

    def deps(self) -> PipelineDeps:
        return build_test_deps(self)

    def run(
        self,
        session: Session,
        *,
        capture: Any,
        deadline_errors: tuple[type[BaseException], ...] = (),
    ) -> ProcessReport:
        with capture(execute=True):
            return session_process(
                session_id=session.pk,
                deps=self.deps(),
                config=self.config,
                deadline_errors=deadline_errors,
            )


def build_test_deps(pipeline: Pipeline) -> PipelineDeps:
    from conversations.turns.tasks import build_pipeline_deps

    deps = build_pipeline_deps(llm=pipeline.llm)
    return replace(
        deps,
        send=pipeline.sent.append,
        enqueue_summary=pipeline.summaries.append,
        mark_read=lambda receipt: pipeline.read.append(receipt.message_id),
        clock=pipeline.clock,
    )


# --- Data ------------------------------------------------------------------------------------------


WATER_SCHEMA = [
    {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
    {"name": "quantidade_amostras", "label": "Quantidade", "type": "integer", "required": True},
    {"name": "cidade_coleta", "label": "Cidade da coleta", "type": "text"},
]
PACKAGE_TEXT = "Use o frasco estéril fornecido pelo laboratório; não enxágue o frasco."


def make_instance() -> Instance:
    instance: Instance = recipes.instance.make()
    return instance


def make_session(instance: Instance, state: SessionState = S.TRIAGE, **fields: Any) -> Session:
    session: Session = recipes.session.make(
        instance=instance, customer_phone=CUSTOMER_PHONE, state=state.value, **fields
    )
    return session


_seconds = iter(range(1, 10_000))


def inbound(session: Session, text: str, *, at: int | None = None) -> Message:
    """A pending INBOUND text as the webhook stores it; `at` = seconds after NOW."""
    second = at if at is not None else next(_seconds)
    return conversation_rows.inbound(session, text, wa_timestamp=NOW + timedelta(seconds=second))


def pipeline(*answers: str | LLMError, **config: Any) -> Pipeline:
    result = Pipeline(llm=FakeLLM(*answers))
    if config:
        result.config = replace(result.config, **config)
    return result


QUALIFYING = {"segment": "AMBIENTAL", "intent": "ORCAMENTO"}
COLLECTING = {
    **QUALIFYING,
    "service": "AGUA_POTABILIDADE",
    "technical_data": {"tipo_amostra": "poço", "quantidade_amostras": 2},
}
REGISTRATION = {"nome": "Ana Lima", "documento": VALID_CPF, "email": "ana@example.com"}


def confirming(instance: Instance) -> Session:
    """A session in CONFIRM after a code 4 that showed REGISTRATION to the customer."""
    return make_session(
        instance,
        S.CONFIRM,
        **COLLECTING,
        registration_data=REGISTRATION,
        confirmation_data=REGISTRATION,
        customer_name="Ana Lima",
    )


# --- Reads -----------------------------------------------------------------------------------------


def outbound(session: Session) -> list[Message]:
    return list(session.messages.filter(direction=Direction.OUTBOUND).order_by("id"))


def events(session: Session) -> list[tuple[str, str]]:
    return list(
        session.messages.filter(direction=Direction.SYSTEM)
        .order_by("id")
        .values_list("message_type", "action")
    )


def llm_calls(session: Session) -> list[tuple[str, str, str, str]]:
    return list(
        LLMCall.objects.filter(session=session)
        .order_by("id")
        .values_list("purpose", "agent", "model", "outcome")
    )


def pending(session: Session) -> int:
    return session.messages.filter(direction=Direction.INBOUND, processed_at=None).count()


# --- Seams -----------------------------------------------------------------------------------------


class DuringCall(FakeLLM):
    """A FakeLLM that runs `hooks[n]` while the n-th call is "thinking"."""

    def __init__(self, *answers: str | LLMError, hooks: dict[int, Any]) -> None:
        super().__init__(*answers)
        self.hooks = hooks

    def chat(self, **kwargs: Any) -> Any:
        hook = self.hooks.get(len(self.calls))
        if hook is not None:
            hook()
        return super().chat(**kwargs)
