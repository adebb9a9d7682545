"""A session's turn: its pending inbound messages → the agents → one answer.

`run.session_process` is the use case behind the ``conversations.process_session`` task
(DESIGN.md §4 steps 2-7, §7, §8). It runs in three phases per turn, and holds no DB transaction
across a model call:

1. **Claim** the session's lease (`conversations.lease`); a worker that finds it taken exits —
   the holder drains every pending inbound message before it releases, then looks once more, so a
   message that arrived while it released is not stranded (`run`).
2. **Think** (no writes but the `LLMCall` rows): the pending inbound messages, ordered by WhatsApp
   timestamp then id, are one turn. A HUMAN or CLOSED session only marks them processed. A
   strategic company's contact is handed off before any model call. Otherwise the agent of the
   state is invoked; its answer is parsed strictly, with exactly one format-repair call on a parse
   error; the parsed answer is validated into an `Action` (`agents.actions`) and dispatched
   (`conversations.dispatcher`) on an in-memory copy of the session. Codes 2, 3 and 7 invoke the
   next agent at once (at most `MAX_AGENT_HOPS_PER_MESSAGE` hops, else ``routing_loop``); code 99
   loads packages and invokes the same agent again (at most
   `MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE` times, else ``enrichment_limit``) (`think`).
3. **Commit**, in one short transaction that re-reads the session under a row lock: if the lease
   is no longer ours, nothing is written; if a newer inbound message arrived meanwhile (or staff
   took the session), the model's draft is stored with ``error="superseded"``, not sent, and the
   turn runs again with every pending message; otherwise the session fields, the SYSTEM events,
   the lead (code 5), the OUTBOUND parts and ``processed_at`` of the turn's messages are written
   together, and the parts are sent — and the summary enqueued on a handoff — after commit. A
   handoff is written by `conversations.handoff.session_handoff`, in the same statements
   (`commit`, with the rows of `rows`).

Outcomes of every failure (each a handoff to HUMAN with the fixed text, never the model's):
parse error not repaired → ``llm_invalid_json``; invalid contract → ``llm_invalid_contract``;
unknown or inactive package → ``unknown_package``; too many hops/enrichments → ``routing_loop`` /
``enrichment_limit``; `LLMTimeoutError` → ``llm_timeout``; `LLMRateLimitError` →
``llm_rate_limited``; any other `LLMError` → ``llm_provider_error``; the task's soft time limit
→ ``llm_timeout``. A handoff or a failure is committed even when a newer message arrived (the
newer message then finds the session in HUMAN); only a draft the model wrote for the customer is
superseded.

The modules, by responsibility:

- `run`: the use case — the lease loop, one turn's phases, the deadline;
- `think`: the agents, parse and repair, validation, dispatch, the strategic-company rule;
- `commit`: the turn's transaction, and `failure_handoff_write` for the repeated-failure sweep;
- `rows`: the session fields and the message and lead rows a turn writes, built in memory;
- `result`: what a turn is (`Turn`) and what it decided (`TurnResult`, `turn_failure`);
- `selectors`: the reads (`session_context`, also the prompt preview's; the pending messages);
- `deps`: the turn's collaborators and limits (`PipelineDeps`, `PipelineConfig`);
- `tasks`: the Celery tasks, thin (``conversations.process_session`` and its neighbours).

This package imports none of its modules here, so a reader of `selectors` (the prompt preview)
does not load the rest.
"""
