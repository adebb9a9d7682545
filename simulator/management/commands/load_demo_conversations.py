"""Load the demo conversations (simulator.demo): recorded conversations played through the
real webhook, pipeline and staff actions, with a scripted model and a sender that never leaves
the machine. DEBUG=True only; does nothing while they exist, unless --reset."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from conversations.models import Instance
from simulator.demo import DemoWouldLeaveTheMachine, demo_conversations_load


class Command(BaseCommand):
    help = "Load the demo conversations (DEBUG=True only; --reset recreates them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo conversations and load them again.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("load_demo_conversations runs only with DEBUG=True.")
        try:
            created = demo_conversations_load(now=timezone.now(), reset=options["reset"])
        except DemoWouldLeaveTheMachine as exc:
            raise CommandError(f"Not loaded: {exc}; unset them for the demo.") from None
        except Instance.DoesNotExist:
            raise CommandError(
                "The demo catalog is not loaded: run `python manage.py bootstrap_dev` first."
            ) from None
        if created:
            self.stdout.write(f"Loaded {created} demo conversations.")
        else:
            self.stdout.write("The demo conversations exist already (--reset recreates them).")
