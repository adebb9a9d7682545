"""`python manage.py prompt_tests (--override ID | --agent NAME) [--json]`: run an agent's active
prompt test cases in this process (`governance.test_cases`) and print which passed.

`--override ID` runs the cases of the override's agent against its text, as it is now, and
stores the run: the activation gate reads it when that text is activated. `--agent NAME` runs
them against the agent's prompt as it is now (its active override or the built-in one) and
stores nothing. `--json` prints one JSON object (`cases`, `passed`, `failed`, `cost_usd`, and one
entry per case with its differences); without it, one line per case and the totals. The exit
code is 1 when a case failed. Nothing is sent to any customer.
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.states import AgentName
from governance.replay import ReplayDeps, replay_model, unpriced_model_refusal
from governance.test_cases import CasesReport, active_cases, prompt_tests_run, run_cases
from prompts_admin.models import PromptOverride

AGENTS = (AgentName.TRIAGEM.value, AgentName.QUALIFICACAO.value, AgentName.COLETA.value)


class Command(BaseCommand):
    help = "Run an agent's prompt test cases against a text; exit code 1 when one fails."

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--override", type=int, metavar="ID", help="against this override")
        target.add_argument("--agent", choices=AGENTS, help="against the agent's current prompt")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        override: PromptOverride | None = None
        if options["override"] is not None:
            override = PromptOverride.objects.filter(pk=options["override"]).first()
            if override is None:
                raise CommandError(f"no prompt override with id {options['override']}")
            agent = override.agent
        else:
            agent = options["agent"]
        refusal = unpriced_model_refusal(replay_model(agent))
        if refusal:
            raise CommandError(refusal)
        deps = ReplayDeps.from_settings()
        if override is not None:
            run, report = prompt_tests_run(override=override, deps=deps)
        else:
            run, report = None, run_cases(active_cases(agent), None, deps)
        if options["json"]:
            data = {"agent": agent, "override": override.pk if override else None}
            data |= {"run_id": run.pk if run else None} | report.as_json()
            self.stdout.write(json.dumps(data, ensure_ascii=False))
        else:
            self._summary(report)
        if report.failed:
            raise SystemExit(1)

    def _summary(self, report: CasesReport) -> None:
        for result in report.results:
            mark = "ok  " if result.passed else "FAIL"
            self.stdout.write(f"{mark} #{result.case_id} {result.title}")
            for difference in result.differences:
                self.stdout.write(f"       {difference}")
        self.stdout.write(
            f"cases: {len(report.results)}, passed: {report.passed}, failed: {report.failed}, "
            f"cost_usd: {report.cost_usd:.6f}"
        )
