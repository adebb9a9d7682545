"""The conversation side of an agent call: the session's history, the `LLMCall` log, and the
factory that wires the production `AgentInvoker`.

`DatabaseHistorySource.history()` is one query on the `message_session_order` index, filtered by
session id, direction (no SYSTEM events) and error (no superseded drafts), newest first and
limited in SQL — so its cost does not grow with the session's length — and put in the one
conversation order of `conversations.message_order`; the invoker checks the session id and the
rules again (`agents.history`). `DatabaseCallRecorder` writes one `LLMCall`
row per call, success or failure, for agents, repairs and summaries alike.
"""

from collections.abc import Callable
from datetime import datetime
from typing import cast

from django.conf import settings
from django.db import connections

from agents.history import QUOTE_CHARS
from agents.invoker import AgentInvoker, InvokerConfig
from agents.llm import LLMClient, OpenAIClient
from agents.sources import (
    CallRecord,
    CallRecorder,
    HistoryDirection,
    HistoryEntry,
    HistorySource,
    KBSource,
    PromptSource,
)
from agents.states import AgentName
from conversations.media_views import MEDIA_COLUMNS_SQL, MEDIA_JOIN_SQL, media_view_of
from conversations.message_order import conversation_order
from conversations.models import Direction, LLMCall, Message
from conversations.prometheus import model_call_observed
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.selectors import DatabasePromptSource

OK_OUTCOME = "ok"
_MODEL_CHARS = LLMCall._meta.get_field("model").max_length or 64
_VERSION_CHARS = LLMCall._meta.get_field("prompt_version").max_length or 32


# Every agent call reads the history: literal SQL, not the ORM's `conversational()` queryset and
# `newest_in_conversation_order`, because with every worker statement the ORM's a turn cost
# 25.4-34.9 ms of worker CPU on the bench machine, over the 25 ms floor (bench/worker_cpu.py),
# the ORM's history the costliest of its reads (1.1-1.7 ms a call there). The conditions are
# `MessageQuerySet.conversational`'s (INBOUND or OUTBOUND, not superseded), without a reply
# WhatsApp refused (e.g. 131047 outside the 24-hour window: the customer never saw it, so the
# model must not believe it was said), an empty text or a reaction (its emoji is shown on the
# message it reacts to, not said in the conversation); newest first by id (`NEWEST_FIRST`),
# limited, then put in conversation order. A quoted reply brings the text it quotes, from the
# same session, by the unique wamid index (one LEFT JOIN; `agents.history` marks it), read up
# to `_QUOTE_READ_CHARS`: more than the quote keeps, even with its spaces folded; a tapped
# button or list row (which always answers the message that offered it) reads as its title
# alone, exactly as the customer typing it would. A media
# message comes with its readable part (the one-to-one MessageMedia, on its unique index), which
# the model reads instead of the text (`agents.media_markers`).
HISTORY_SQL = f"""SELECT m.id, m.session_id, m.direction, m.content, m.error, m.wa_timestamp,
        m.staff_user_id, SUBSTR(q.content, 1, {{quote_chars}}) AS quoted, {MEDIA_COLUMNS_SQL}
    FROM conversations_message m
    LEFT JOIN conversations_message q ON m.reply_to_wamid <> ''
        AND m.message_type NOT IN ('interactive', 'button')
        AND q.wa_message_id = m.reply_to_wamid AND q.session_id = m.session_id
    {MEDIA_JOIN_SQL}
    WHERE m.session_id = %s AND m.direction IN ('INBOUND', 'OUTBOUND')
        AND m.error <> 'superseded' AND m.delivery_status <> 'failed'
        AND (m.content <> '' OR mm.id IS NOT NULL)
        AND m.message_type <> 'reaction'{{before}}
    ORDER BY m.id DESC LIMIT %s"""
_QUOTE_READ_CHARS = 5 * QUOTE_CHARS
_CREATED_AT = Message._meta.get_field("created_at")


class DatabaseHistorySource:
    """`before`: only the messages stored before that moment (a replay rebuilds the history
    as a recorded call saw it, `governance.replay`)."""

    def __init__(self, *, before: datetime | None = None) -> None:
        self._before = before

    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        if limit <= 0:
            return []
        params: list[object] = [session_id]
        before = ""
        if self._before is not None:
            before = " AND m.created_at < %s"
            params.append(
                _CREATED_AT.get_db_prep_value(self._before, connections[Message.objects.db])
            )
        newest_first = Message.objects.raw(
            HISTORY_SQL.format(before=before, quote_chars=_QUOTE_READ_CHARS), [*params, limit]
        )
        messages = conversation_order(reversed(list(newest_first)))
        return [
            HistoryEntry(
                session_id=m.session_id,
                # The column's choices are the directions (conversations.models.Direction).
                direction=cast(HistoryDirection, m.direction),
                content=m.content,
                error=m.error,
                message_id=m.pk,
                staff=m.direction == Direction.OUTBOUND and m.staff_user_id is not None,
                # The statement's extra column: a raw queryset sets it on the instance.
                quoted=getattr(m, "quoted", None) or "",
                media=media_view_of(m),
            )
            for m in messages
        ]


class DatabaseCallRecorder:
    def record(self, call: CallRecord) -> None:
        if call.result is not None:
            result = call.result
            usage = (result.tokens_input, result.tokens_cached, result.tokens_output)
            latency_ms = result.latency_ms
            attempts, outcome, error_text = result.attempts, OK_OUTCOME, ""
        else:
            assert call.error is not None, "a CallRecord holds a result or an error"
            error = call.error
            usage, latency_ms = (0, 0, 0), error.latency_ms
            attempts, outcome, error_text = error.attempts, error.outcome, str(error)
        snapshot = call.context_snapshot
        row = LLMCall.objects.create(
            session_id=call.session_id,
            message_id=call.message_id,
            turn_id=call.turn_id,
            agent=call.agent.value if isinstance(call.agent, AgentName) else str(call.agent),
            purpose=call.purpose,
            model=call.model[:_MODEL_CHARS],
            tokens_input=usage[0],
            cached_tokens=usage[1],
            tokens_output=usage[2],
            latency_ms=latency_ms,
            attempts=attempts,
            outcome=outcome,
            error=error_text,
            prompt_version=call.prompt_version[:_VERSION_CHARS],
            context_snapshot=dict(snapshot) if snapshot is not None else None,
            raw_response=call.raw_response,
        )
        model_call_observed(
            agent=row.agent,
            model=row.model,
            latency_ms=row.latency_ms,
            tokens_input=row.tokens_input,
            tokens_output=row.tokens_output,
            tokens_cached=row.cached_tokens,
        )


def build_agent_invoker(
    *,
    llm: LLMClient | None = None,
    prompts: PromptSource | None = None,
    kb: KBSource | None = None,
    history: HistorySource | None = None,
    recorder: CallRecorder | None = None,
    clock: Callable[[], datetime] | None = None,
) -> AgentInvoker:
    """The production invoker: database sources, the LLMCall recorder, models per agent from
    OPENAI_MODEL_TRIAGE / _QUALIFICATION / _COLLECTION, MAX_HISTORY_MESSAGES; `llm` defaults to
    `OpenAIClient.from_settings()`; `prompts` and `kb` let a caller share its own sources; a
    replay passes its own `history`, `recorder` and `clock` (the recorded call's time)."""
    return AgentInvoker(
        llm=llm if llm is not None else OpenAIClient.from_settings(),
        prompts=prompts if prompts is not None else DatabasePromptSource(),
        kb=kb if kb is not None else DatabaseKBSource(),
        history=history if history is not None else DatabaseHistorySource(),
        recorder=recorder if recorder is not None else DatabaseCallRecorder(),
        config=InvokerConfig(
            models={
                AgentName.TRIAGEM: settings.OPENAI_MODEL_TRIAGE,
                AgentName.QUALIFICACAO: settings.OPENAI_MODEL_QUALIFICATION,
                AgentName.COLETA: settings.OPENAI_MODEL_COLLECTION,
            },
            max_history_messages=settings.MAX_HISTORY_MESSAGES,
            **({"clock": clock} if clock is not None else {}),
        ),
    )
