"""Talk to the bot as a customer, from the terminal, without WhatsApp.

    python manage.py simulate                        # interactive: /reset, /quit
    python manage.py simulate --say "Oi" --say "Quero um orçamento"
    python manage.py simulate --json --say "Oi"      # one JSON object per message, per line
    python manage.py simulate --phone 5500000000002 --instance 100000000000001

Thin: the use cases are in `simulator.simulation` (the real webhook use case and pipeline, a
sender that never calls the WhatsApp API, simulated sessions a real delivery never finds). The
phone must be in the simulator's reserved range (digits starting with 5500). Needs a model:
OPENAI_API_KEY, and OPENAI_BASE_URL for any Responses-compatible server. Log lines below WARNING
are hidden unless ``-v 2``.
"""

import logging
import sys
from typing import Any, TextIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.translation import gettext

from conversations.labels import state_label, usd_text
from conversations.models import Instance
from simulator.simulation import (
    SIMULATED_PHONE,
    SIMULATED_PHONE_PREFIX,
    SimulationError,
    TurnReport,
    model_configured,
    simulated_message_send,
    simulated_phone_check,
    simulated_session_reset,
    simulation_instance,
)

NO_MODEL = (
    "simulate needs a model: set OPENAI_API_KEY "
    "(and OPENAI_BASE_URL for any Responses-compatible server)."
)
PROMPT = "você> "


class Command(BaseCommand):
    help = "Talk to the bot as a customer (never sent to WhatsApp); interactive by default."
    # Tests feed the interactive mode through call_command(..., stdin=StringIO(...)).
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--say",
            action="append",
            default=[],
            metavar="TEXT",
            help="a customer message (repeatable, sent in order); no prompt then",
        )
        parser.add_argument(
            "--phone",
            default=SIMULATED_PHONE,
            metavar="DIGITS",
            help=f"the simulated customer's phone, 12 or 13 digits starting with "
            f"{SIMULATED_PHONE_PREFIX} (default {SIMULATED_PHONE}); "
            "the same phone continues the same conversation",
        )
        parser.add_argument(
            "--instance",
            default=None,
            metavar="PHONE_NUMBER_ID",
            help="the instance written to (default the demo catalog's)",
        )
        parser.add_argument(
            "--json",
            action="store_true",
            help="print one JSON object per customer message, one per line",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not model_configured():
            raise CommandError(NO_MODEL)
        phone: str = options["phone"]
        try:
            simulated_phone_check(phone)
            instance = simulation_instance(options["instance"])
        except SimulationError as exc:
            raise CommandError(str(exc)) from exc
        as_json: bool = options["json"]
        # The pipeline's INFO log lines would interleave with the conversation: -v 2 shows them.
        quiet = options["verbosity"] < 2
        if quiet:
            logging.disable(logging.INFO)
        try:
            if options["say"]:
                for text in options["say"]:
                    self._say(instance, phone, text, as_json=as_json, echo=not as_json)
                return
            stdin = options.get("stdin") or sys.stdin
            self._interactive(instance, phone, stdin, as_json=as_json)
        finally:
            if quiet:
                logging.disable(logging.NOTSET)

    def _interactive(self, instance: Instance, phone: str, stdin: TextIO, *, as_json: bool) -> None:
        if not as_json:
            self.stdout.write(
                gettext(
                    "Simulated customer %(phone)s on %(instance)s (never sent to WhatsApp). "
                    "/reset starts a new conversation, /quit leaves."
                )
                % {"phone": phone, "instance": instance}
            )
        while True:
            if not as_json:
                self.stdout.write(PROMPT, ending="")
                self.stdout.flush()
            line = stdin.readline()
            if not line:  # end of input
                return
            text = line.strip()
            if not text:
                continue
            if text == "/quit":
                return
            if text == "/reset":
                closed = simulated_session_reset(instance=instance, phone=phone)
                if not as_json:
                    self.stdout.write(
                        gettext("(conversation #%(id)s closed)") % {"id": closed}
                        if closed
                        else gettext("(no open conversation)")
                    )
                continue
            self._say(instance, phone, text, as_json=as_json, echo=False)

    def _say(self, instance: Instance, phone: str, text: str, *, as_json: bool, echo: bool) -> None:
        try:
            report = simulated_message_send(instance=instance, phone=phone, text=text)
        except SimulationError as exc:
            raise CommandError(str(exc)) from exc
        if as_json:
            self.stdout.write(report.as_json())
            return
        if echo:
            self.stdout.write(f"{PROMPT}{text}")
        self.stdout.write(human_text(report))


def human_text(report: TurnReport) -> str:
    """The bot's replies (the last one's buttons or list rows in brackets: type one to answer
    as a tap would), then one line of what the turn did."""
    lines = [f"bot> {reply}" for reply in report.replies]
    if report.options:
        lines.append("     " + " ".join(f"[{option['title']}]" for option in report.options))
    meta = [
        gettext("conversation #%(id)s") % {"id": report.session_id},
        gettext("state %(state)s") % {"state": state_label(report.state)},
        gettext("code %(code)s") % {"code": report.code if report.code is not None else "-"},
    ]
    if report.handoff_reason:
        meta.append(gettext("handoff %(reason)s") % {"reason": report.handoff_reason})
    if report.agents:
        meta.append(gettext("agents %(agents)s") % {"agents": ", ".join(report.agents)})
    if report.packages:
        meta.append(gettext("packages %(packages)s") % {"packages": ", ".join(report.packages)})
    meta.append(
        gettext("tokens %(input)s in / %(output)s out")
        % {"input": report.tokens["input"], "output": report.tokens["output"]}
    )
    if report.cost_usd is not None:
        meta.append(usd_text(report.cost_usd))
    lines.append("     (" + " · ".join(meta) + ")")
    return "\n".join(lines)
