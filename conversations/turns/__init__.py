"""A session's turn: its pending inbound messages → the agents → one answer.

`run.session_process` is the use case behind the ``conversations.process_session`` task
(DESIGN.md §4 steps 2-7, §7, §8). A turn claims the session's lease (`conversations.lease`),
thinks with no writes but the `LLMCall` rows, then commits what it decided in one short
transaction that re-reads the session under a row lock: no DB transaction is held across a model
call, a lease lost meanwhile writes nothing, and a draft overtaken by a newer message or a staff
takeover is stored as superseded, never sent. Every failure is a handoff with the fixed text,
never the model's words. The modules by responsibility and every outcome (docs/architecture.md,
Pipeline).

This package imports none of its modules here, so a reader of `selectors` (the prompt preview)
does not load the rest.
"""
