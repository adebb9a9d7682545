"""`python manage.py replay --override ID [--last N] [--since DATE] [--until DATE] [--segment S]
[--handoff-reason R] [--json]`: replay a prompt override's text over recorded calls of its agent,
in this process (no worker), and print the totals (`governance.replay`). It counts against
REPLAY_MAX_RUNNING like a run started in the admin: with no run slot free it stays queued.

The run is stored like one started in the admin, and browsable there. `--json` prints one JSON
object; without it, one line per result and the totals. Nothing is sent to any customer.
"""

import json
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.models import ReplayRun
from governance.replay import (
    ReplayFilters,
    ReplayRefused,
    replay_run_execute,
    replay_run_start,
)
from governance.tasks import replay_run_dispatch
from prompts_admin.models import PromptOverride

TOTALS = (
    "calls",
    "code_changed",
    "state_changed",
    "handoff_changed",
    "contract_errors",
    "repaired",
    "provider_errors",
    "tokens_input",
    "cached_tokens",
    "tokens_output",
    "cost_usd",
)


def run_summary(run: ReplayRun) -> dict[str, Any]:
    """The run's totals as the command prints them (`calls`: the calls replayed)."""
    return {
        "run_id": run.pk,
        "status": str(run.status),
        "detail": run.detail,
        "calls_selected": run.calls_selected,
        "calls": run.calls_done,
        "code_changed": run.code_changed,
        "state_changed": run.state_changed,
        "handoff_changed": run.handoff_changed,
        "contract_errors": run.contract_errors,
        "repaired": run.repaired,
        "provider_errors": run.provider_errors,
        "tokens_input": run.tokens_input,
        "cached_tokens": run.cached_tokens,
        "tokens_output": run.tokens_output,
        "cost_usd": float(run.cost_usd.quantize(Decimal("0.000001"))),
    }


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not a date (YYYY-MM-DD): {value!r}") from None


def _positive(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise CommandError(f"--last takes a positive whole number, not {value!r}")
    return int(value)


class Command(BaseCommand):
    help = "Replay a prompt override over recorded calls of its agent; nothing is sent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--override", required=True, type=int, metavar="ID")
        parser.add_argument("--last", metavar="N", help="only the newest N calls")
        parser.add_argument("--since", metavar="YYYY-MM-DD", help="calls from this day on")
        parser.add_argument("--until", metavar="YYYY-MM-DD", help="calls up to this day")
        parser.add_argument("--segment", default="", help="the conversation's segment code")
        parser.add_argument(
            "--handoff-reason", default="", help="the conversation's handoff reason"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        override = PromptOverride.objects.filter(pk=options["override"]).first()
        if override is None:
            raise CommandError(f"no prompt override with id {options['override']}")
        filters = ReplayFilters(
            date_from=_day(options["since"]) if options["since"] else None,
            date_to=_day(options["until"]) if options["until"] else None,
            segment=options["segment"],
            handoff_reason=options["handoff_reason"],
            last_n=_positive(options["last"]) if options["last"] else None,
        )
        try:
            run = replay_run_start(override=override, filters=filters, user=None)
        except ReplayRefused as refusal:
            raise CommandError(str(refusal)) from None
        # With REPLAY_MAX_RUNNING runs going already, the run stays queued (its status says
        # so) and the run that ends next publishes it to a worker.
        run = replay_run_execute(run_id=run.pk, dispatch=replay_run_dispatch)
        summary = run_summary(run)
        if options["json"]:
            self.stdout.write(json.dumps(summary, ensure_ascii=False))
            return
        self._table(run)
        for key in ("run_id", "status", "detail", "calls_selected", *TOTALS):
            self.stdout.write(f"{key}: {summary[key]}")

    def _table(self, run: ReplayRun) -> None:
        header = f"{'call':>8}  {'code':>9}  {'state':>25}  {'handoff':>35}  contract"
        self.stdout.write(header)
        for r in run.results.order_by("recorded_at", "id"):
            code = f"{_v(r.recorded_code)}→{_v(r.replayed_code)}"
            state = f"{_v(r.recorded_state)}→{_v(r.replayed_state)}"
            handoff = f"{_v(r.recorded_handoff)}→{_v(r.replayed_handoff)}"
            contract = r.contract or f"error: {r.error[:60]}"
            self.stdout.write(
                f"{_v(r.llm_call_id):>8}  {code:>9}  {state:>25}  {handoff:>35}  {contract}"
            )


def _v(value: object) -> str:
    return "—" if value in (None, "") else str(value)
