"""Celery tasks of the pipeline: thin — each wires its collaborators and calls one use case.

- ``conversations.process_session(session_id)``: `session_process`. Its soft time limit (the
  model's read timeout bounds each read, not a whole call) ends the current turn in an
  ``llm_timeout`` handoff and releases the lease; the hard limit, 30 s later, stays below the
  lease TTL and the broker's visibility timeout (config/settings.py).
- ``conversations.generate_handoff_summary(session_id)``: `handoff_summary_generate`, enqueued
  after the commit of every handoff.
- ``conversations.requeue_expired_leases()``: every minute (Celery beat), re-enqueues the
  sessions whose lease expired with inbound messages still pending — a turn that died with its
  worker is answered without the customer writing again.

Tasks are idempotent: a second `process_session` finds the lease taken or nothing pending; a
second summary writes one more `HandoffSummary` (the newest is shown).
"""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from agents.llm import LLMClient, OpenAIClient
from conversations.agent_sources import DatabaseCallRecorder, build_agent_invoker
from conversations.handoff import handoff_summary_generate
from conversations.lease import expired_leases_requeue
from conversations.pipeline import PipelineConfig, PipelineDeps, session_process
from conversations.whatsapp.tasks import mark_read, send_message
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.selectors import DatabasePromptSource


def _send(message_id: int) -> None:
    # The WhatsApp channel owns the Graph API and sends a split answer's parts in order.
    send_message.delay(message_id)


def _mark_read(message_id: int) -> None:
    mark_read.delay(message_id)


def _enqueue_summary(session_id: int) -> None:
    generate_handoff_summary.delay(session_id)


def build_pipeline_deps(*, llm: LLMClient | None = None) -> PipelineDeps:
    """The production collaborators of a turn (tests pass their own `llm`)."""
    client = llm or OpenAIClient.from_settings()
    return PipelineDeps(
        invoker=build_agent_invoker(llm=client),
        llm=client,
        prompts=DatabasePromptSource(),
        kb=DatabaseKBSource(),
        recorder=DatabaseCallRecorder(),
        send=_send,
        enqueue_summary=_enqueue_summary,
        mark_read=_mark_read,
    )


@shared_task(
    name="conversations.process_session",
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def process_session(session_id: int) -> str:
    """Answer the session's pending inbound messages; returns the outcome (busy, drained...)."""
    report = session_process(
        session_id=session_id,
        deps=build_pipeline_deps(),
        config=PipelineConfig.from_settings(),
        deadline_errors=(SoftTimeLimitExceeded,),
    )
    return report.outcome.value


@shared_task(name="conversations.generate_handoff_summary")
def generate_handoff_summary(session_id: int) -> int:
    """Write the handed-off session's operational summary; returns the HandoffSummary id."""
    summary = handoff_summary_generate(
        session_id=session_id,
        llm=OpenAIClient.from_settings(),
        recorder=DatabaseCallRecorder(),
        model=settings.OPENAI_MODEL_SUMMARY,
    )
    return summary.pk


@shared_task(name="conversations.requeue_expired_leases")
def requeue_expired_leases() -> int:
    """Re-enqueue `process_session` for sessions whose lease expired with messages pending."""
    return len(expired_leases_requeue(now=timezone.now(), enqueue=process_session.delay))
