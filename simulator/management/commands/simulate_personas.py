"""`python manage.py simulate_personas [--override ID | --release ID] [--persona ID ...] [--json]`:
play simulated customers' whole conversations in this process (`simulator.personas`) and print
which reached their expected outcome.

`--override ID` plays them against that prompt personalizado (pinned for its agent, the prompts
in use for the others); `--release ID` against that release's prompt versions (a draft release
too, to try it before it is published); without either, against the prompts in use. `--persona
ID` (repeatable) chooses the personas, active or not; without it, every active one. The run is
stored (the admin shows it) and keeps to the replay's caps (REPLAY_MAX_RUNNING,
REPLAY_CONCURRENCY, REPLAY_MAX_COST_USD). `--json` prints one JSON object (`personas`, `reached`,
`failed`, `cost_usd`, and one entry per persona); without it, one line per persona and the
totals. The exit code is 1 when a persona missed its outcome. Nothing is sent to WhatsApp.
"""

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from governance.models import ReplayStatus
from prompts_admin.models import PromptOverride, Release
from simulator.personas import (
    PersonaRunRefused,
    persona_run_execute,
    persona_run_fail_waiting,
    persona_run_start,
    run_report,
)


class Command(BaseCommand):
    help = "Play simulated customers against a prompt; exit code 1 when one misses its outcome."

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group()
        target.add_argument("--override", type=int, metavar="ID", help="against this override")
        target.add_argument("--release", type=int, metavar="ID", help="against this release")
        parser.add_argument(
            "--persona", type=int, action="append", default=[], metavar="ID", help="this persona"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        override: PromptOverride | None = None
        if options["override"] is not None:
            override = PromptOverride.objects.filter(pk=options["override"]).first()
            if override is None:
                raise CommandError(f"no prompt override with id {options['override']}")
        release: Release | None = None
        if options["release"] is not None:
            release = Release.objects.filter(pk=options["release"]).first()
            if release is None:
                raise CommandError(f"no release with id {options['release']}")
        try:
            run = persona_run_start(
                override=override, release=release, persona_ids=options["persona"]
            )
        except PersonaRunRefused as refusal:
            raise CommandError(str(refusal)) from None
        run = persona_run_execute(run_id=run.pk)
        if run.status == ReplayStatus.QUEUED:
            persona_run_fail_waiting(run_id=run.pk, now=timezone.now(), older_than=timedelta(0))
            raise CommandError(
                "every replay run slot is taken (REPLAY_MAX_RUNNING): try again when a replay ends"
            )
        report = run_report(run)
        if options["json"]:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            self._summary(report)
        if run.status == ReplayStatus.FAILED:
            raise CommandError(run.detail or "the run failed")
        if report["failed"]:
            raise SystemExit(1)

    def _summary(self, report: dict[str, Any]) -> None:
        for result in report["results"]:
            mark = "ok  " if result["reached"] else "FAIL"
            self.stdout.write(
                f"{mark} #{result['persona']} {result['title']}: {result['outcome']}"
                f"{' (' + result['handoff_reason'] + ')' if result['handoff_reason'] else ''}, "
                f"{result['turns']} messages, {result['contract_errors']} contract errors, "
                f"cost_usd {result['cost_usd']}"
            )
            for difference in result["differences"]:
                self.stdout.write(f"       {difference}")
        if report["detail"]:
            self.stdout.write(report["detail"])
        self.stdout.write(
            f"personas: {report['personas']}, reached: {report['reached']}, "
            f"failed: {report['failed']}, cost_usd: {report['cost_usd']}"
        )
