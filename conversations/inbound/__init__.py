"""Receive a WhatsApp webhook delivery: keep its raw body and apply its events, in ONE transaction.

The use case of the WhatsApp webhook, by responsibility (callers import from these modules):

- `deliveries`: receive, store and reprocess a delivery, and the transaction around it;
- `events`: apply a parsed payload — one handler per message kind, in a table, over a small
  context (echoes and ``system`` messages included);
- `statuses`: apply delivery statuses to the OUTBOUND messages they name;
- `session_rules`: the session rules (open session, idle, identity fill-in, forward-only times,
  pending text, queued turn), each written once, and the sessions one delivery meets;
- `tasks`: the thin Celery tasks of deferred deliveries.
"""
