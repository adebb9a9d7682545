"""Use cases that call the Graph API: send an OUTBOUND message, mark an INBOUND one as read.

Sending is at-most-once per message as far as this side can make it:

1. claim: a short transaction locks the row (``SELECT ... FOR UPDATE``); a message that has a wamid,
   has failed for good, or is claimed by another worker (``delivery_status="pending"`` with a
   ``delivery_status_at`` younger than `SEND_CLAIM_SECONDS`) is left alone; otherwise the claim is
   written (``pending``, now, ``send_attempts + 1``) and committed;
2. call the Graph API with no transaction open;
3. store the wamid and ``sent``, or Meta's error code and title.

A worker that dies between 2 and 3 leaves a claim that expires after `SEND_CLAIM_SECONDS`; the
message may then be sent a second time — the Cloud API has no idempotency key, so that window is
the one duplicate this design cannot close.

The parts of a split answer (same ``turn_id``, ``part_index`` 0, 1, ...) go out in order: sending
any part sends the turn's parts in ``part_index`` order, each only after the previous one was
accepted (it has a wamid). So the pipeline may enqueue `send_message` for the first part only,
or for every part: a task that meets a part claimed by another worker stops, and that worker
carries on with the rest. A part refused for good fails the parts after it, unsent.

Dry run (`sender_for`): with no access token at all (neither the instance's nor
``WHATSAPP_ACCESS_TOKEN``: the `make run` default) or for a simulated session
(`Session.is_simulated`), the message goes through the same claim and store steps with
`DryRunSender`: it is stored as sent with a fake wamid ``sim.<uuid>`` (how a simulated send is
told apart: `is_simulated_wamid`) and logged as ``whatsapp_send_simulated`` with its id and why
(`DryRunReason`); no request leaves the machine. Mark-read does nothing then. Staff read such a
message as simulated, never as sent (`conversations.labels.delivery_label`).

The modules, by responsibility: `turn_parts` (the use case: a message and its turn's parts, in
order), `part` (one claimed part's Graph API call and what its answer does), `claim` (the claim
state machine: claim, release, failed, sent), `early_statuses` (callbacks that came before the
wamid), `senders` (the Graph client or the dry-run sender), `template_payload`, `read_receipts`
and `outcomes`. The names other modules use are imported here.
"""

from conversations.sending.claim import PREVIOUS_PART_FAILED, SEND_CLAIM_SECONDS
from conversations.sending.outcomes import RetryableSendError, SendOutcome
from conversations.sending.read_receipts import ReadReceipt, read_receipt_for, read_receipt_send
from conversations.sending.senders import (
    DRY_RUN_SENDER,
    DryRunReason,
    dry_run_reason,
    sender_for,
)
from conversations.sending.template_payload import TEMPLATE_MESSAGE_TYPE, TemplatePayload
from conversations.sending.turn_parts import outbound_message_send

__all__ = [
    "DRY_RUN_SENDER",
    "PREVIOUS_PART_FAILED",
    "SEND_CLAIM_SECONDS",
    "TEMPLATE_MESSAGE_TYPE",
    "DryRunReason",
    "ReadReceipt",
    "RetryableSendError",
    "SendOutcome",
    "TemplatePayload",
    "dry_run_reason",
    "outbound_message_send",
    "read_receipt_for",
    "read_receipt_send",
    "sender_for",
]
