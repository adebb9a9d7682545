"""Recorded calls for the replay tests, made the way production makes them: a customer's message
answered by a real turn (`session_process` with the production collaborators), the model being
the fake OpenAI server. The turn's `LLMCall` rows, context snapshots included, are the real ones.
"""

from typing import Any

from agents.states import SessionState
from conversations.models import Instance, LLMCall, LLMCallPurpose, Message, Session
from conversations.turns.deps import PipelineConfig
from conversations.turns.run import session_process
from conversations.turns.tasks import build_pipeline_deps
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers import conversation_rows

GREETING = '{"s":1}Olá! Como posso ajudar?'
DRAFT_TEXT = "Você é a triagem do laboratório (rascunho). Seja breve."


def conversation(instance: Instance, **fields: Any) -> Session:
    session: Session = recipes.session.make(instance=instance, **fields)
    return session


def record_turn(
    session: Session,
    text: str,
    answer: str,
    *,
    model: FakeOpenAIServer,
    capture: Any,
    tokens: tuple[int, int] = (100, 20),
) -> LLMCall:
    """The customer writes `text`, a real turn answers with the model's `answer`: its agent
    call."""
    conversation_rows.inbound(session, text)
    model.queue_text(answer, input_tokens=tokens[0], output_tokens=tokens[1])
    with capture(execute=True):
        session_process(session_id=session.pk, deps=build_pipeline_deps(), config=PipelineConfig())
    call: LLMCall = LLMCall.objects.filter(session=session, purpose=LLMCallPurpose.AGENT).latest(
        "id"
    )
    return call


def draft(
    agent: str = "triagem", content: str = DRAFT_TEXT, *, is_active: bool = False
) -> PromptOverride:
    override: PromptOverride = PromptOverride.objects.create(
        agent=agent, content=content, is_active=is_active
    )
    return override


def database_state() -> dict[str, Any]:
    """Every Message, Session and LLMCall row as it is (the replay must change none)."""
    return {
        "messages": list(Message.objects.order_by("id").values()),
        "sessions": list(Session.objects.order_by("id").values()),
        "calls": list(LLMCall.objects.order_by("id").values()),
    }


TRIAGE = SessionState.TRIAGE
