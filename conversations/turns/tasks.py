"""Celery tasks of the turns: thin — each wires its collaborators and calls one use case.

- ``conversations.process_session(session_id)``: `conversations.turns.run.session_process`.
  Its soft time limit (the model's read timeout bounds each read, not a whole call) ends the
  current turn in an ``llm_timeout`` handoff and releases the lease; the hard limit, 30 s later,
  stays below the lease TTL and the broker's visibility timeout (config/settings.py).
- ``conversations.generate_handoff_summary(session_id)``: `handoff_summary_generate`, enqueued
  after the commit of every handoff.
- ``conversations.requeue_expired_leases()``: every minute (Celery beat), re-enqueues the
  stalled sessions (`conversations.lease.stalled_sessions`): a lease expired with inbound
  messages pending (a turn that died with its worker), or a bot-state session with no lease whose
  oldest pending message is older than `STALLED_PENDING_GRACE` (a publish that failed, a turn
  that raised) — the customer never has to write again. A turn that raised is recorded and, at
  the third failure in a row, handed off (`conversations.sweeps.turn_failure_handle`).

Tasks are idempotent: a second `process_session` finds the lease taken or nothing pending; a
second summary writes one more `HandoffSummary` (the newest is shown).
"""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from agents.llm import LLMClient
from agents.sources import KBSource, PromptSource, TaskScopedKBSource, TaskScopedPromptSource
from conversations.agent_sources import DatabaseCallRecorder, build_agent_invoker
from conversations.config_cache import CachedKBSource, CachedPromptSource, worker_config_cache
from conversations.handoff import handoff_summary_generate
from conversations.lease import STALLED_PENDING_GRACE, stalled_sessions_requeue
from conversations.provider_circuit import task_llm_client
from conversations.sending.worker import read_receipt_submit, reply_send, send_message
from conversations.sweeps import turn_failure_handle
from conversations.turns.deps import PipelineConfig, PipelineDeps
from conversations.turns.run import session_process
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.selectors import DatabasePromptSource

logger = logging.getLogger(__name__)


def _send(message_id: int) -> None:
    # The WhatsApp channel owns the Graph API and sends a split answer's parts in order. A
    # worker sends at once, from the thread that committed the turn (`reply_send`); eager
    # Celery (no broker) runs the task in-process, with its bounded eager retries.
    if send_message.app.conf.task_always_eager:
        send_message.delay(message_id)
    else:
        reply_send(message_id)


def _enqueue_summary(session_id: int) -> None:
    generate_handoff_summary.delay(session_id)


def build_pipeline_deps(
    *, llm: LLMClient | None = None, prompts: PromptSource | None = None
) -> PipelineDeps:
    """The production collaborators of a turn (tests pass their own `llm`; the simulator its
    chosen `prompts`)."""
    client = llm or task_llm_client()
    prompt_source: PromptSource = prompts or DatabasePromptSource()
    kb_source: KBSource = DatabaseKBSource()
    cache = worker_config_cache()
    if cache is not None:
        # A worker's: read at most every WORKER_CONFIG_CACHE_SECONDS (conversations.config_cache);
        # a caller's own prompts (the simulator's draft) are read as given.
        kb_source = CachedKBSource(kb_source, cache)
        if prompts is None:
            prompt_source = CachedPromptSource(prompt_source, cache)
    # One read of the runtime settings, overrides and catalog per task, shared by the pipeline
    # and the invoker (instead of one per agent hop each).
    prompts = TaskScopedPromptSource(prompt_source)
    kb = TaskScopedKBSource(kb_source)
    return PipelineDeps(
        invoker=build_agent_invoker(llm=client, prompts=prompts, kb=kb),
        llm=client,
        prompts=prompts,
        kb=kb,
        recorder=DatabaseCallRecorder(),
        send=_send,
        enqueue_summary=_enqueue_summary,
        mark_read=read_receipt_submit,
    )


@shared_task(
    name="conversations.process_session",
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def process_session(session_id: int) -> str:
    """Answer the session's pending inbound messages; returns the outcome (busy, drained...)."""
    try:
        report = session_process(
            session_id=session_id,
            deps=build_pipeline_deps(),
            config=PipelineConfig.from_settings(),
            deadline_errors=(SoftTimeLimitExceeded,),
        )
    except Exception as exc:
        # A bug or an infrastructure error: the lease is released and the messages are pending,
        # so the sweep runs the turn again; the third failure in a row hands the session off.
        # Re-raised, so the traceback reaches the worker log.
        turn_failure_handle(
            session_id=session_id,
            error=exc,
            now=timezone.now(),
            runtime=DatabasePromptSource().runtime,
            send=_send,
            enqueue_summary=_enqueue_summary,
        )
        raise
    return report.outcome.value


@shared_task(name="conversations.generate_handoff_summary")
def generate_handoff_summary(session_id: int) -> int:
    """Write the handed-off session's operational summary; returns the HandoffSummary id."""
    summary = handoff_summary_generate(
        session_id=session_id,
        llm=task_llm_client(),
        recorder=DatabaseCallRecorder(),
        model=settings.OPENAI_MODEL_SUMMARY,
    )
    return summary.pk


@shared_task(name="conversations.requeue_expired_leases")
def requeue_expired_leases() -> int:
    """Re-enqueue `process_session` for the stalled sessions (expired lease, or a lost turn).

    The name predates the lost-turn case; it is kept so a running beat keeps scheduling it.
    """
    requeued = stalled_sessions_requeue(
        now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=process_session.delay
    )
    return len(requeued)
