"""What a turn runs with: its collaborators (`PipelineDeps`) and its limits (`PipelineConfig`).

The task layer (`conversations.turns.tasks.build_pipeline_deps`) wires the real collaborators;
tests and the bench pass their own model, seams and clock.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from agents.context import SessionContext
from agents.invoker import AgentCall
from agents.llm import LLMClient
from agents.sources import CallRecorder, KBSource, PromptSource
from agents.states import AgentName
from conversations.sending import ReadReceipt


class Invoker(Protocol):
    """`agents.invoker.AgentInvoker.invoke`, the one method the pipeline needs."""

    def invoke(
        self,
        *,
        session: SessionContext,
        agent: AgentName,
        turn_id: UUID | None = None,
        message_id: int | None = None,
        current_message: str | None = None,
    ) -> AgentCall: ...


def no_read_receipt(_receipt: ReadReceipt) -> None:
    """The `mark_read` of a turn that marks nothing read (the simulator, the demo, benches)."""
    return None


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    max_agent_hops: int = 3
    max_enrichments: int = 2
    repair_model: str = "gpt-4o-mini"
    # Longer than the task's hard time limit: a live holder never sees its lease expire.
    lease_ttl: timedelta = timedelta(seconds=180)

    @classmethod
    def from_settings(cls) -> "PipelineConfig":
        return cls(
            max_agent_hops=settings.MAX_AGENT_HOPS_PER_MESSAGE,
            max_enrichments=settings.MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE,
            repair_model=settings.OPENAI_MODEL_SUMMARY,
            lease_ttl=timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30),
        )


@dataclass(frozen=True, slots=True)
class PipelineDeps:
    """The collaborators of a turn; the task layer wires the real ones, tests pass fakes."""

    invoker: Invoker
    # The client of the format-repair call (the invoker has its own for the agents).
    llm: LLMClient
    prompts: PromptSource
    kb: KBSource
    recorder: CallRecorder
    # Send one OUTBOUND message id, or enqueue its sending (called after commit, parts in order).
    send: Callable[[int], None]
    # Enqueue the operational summary of a handed-off session (called after commit).
    enqueue_summary: Callable[[int], None]
    # Mark the turn's newest INBOUND message read with a typing indicator as the turn starts
    # (best effort: it must return at once and never raise).
    mark_read: Callable[[ReadReceipt], None] = no_read_receipt
    clock: Callable[[], datetime] = timezone.now
