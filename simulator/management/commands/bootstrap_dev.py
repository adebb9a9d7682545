"""First-run setup for a developer machine: the demo catalog, the demo conversations and a local
superuser.

Runs only with DEBUG=True. Safe to run again: the catalog (with a first history version of each
versioned row) is loaded only while no Instance exists, the demo conversations
(`simulator.demo`) only while the demo instance exists and they do not, and the superuser is
created only while none exists.
"""

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from conversations.models import Instance
from simulator.demo import (
    DEMO_PHONE_NUMBER_ID,
    DemoWouldLeaveTheMachine,
    demo_conversations_load,
)


class Command(BaseCommand):
    help = "Load the demo catalog and conversations and create a local superuser (DEBUG=True only)."

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "bootstrap_dev runs only with DEBUG=True (it creates an admin user)."
            )
        if not Instance.objects.exists():
            try:
                call_command("loaddata", "demo", verbosity=0)
            except CommandError as exc:
                if "No fixture named" not in str(exc):
                    raise
                self.stdout.write("No demo fixture yet; skipped.")
            else:
                # loaddata writes no history; a baseline version lets the first admin edit be
                # diffed and reverted. populate_history skips models that already have history.
                call_command("populate_history", "--auto", verbosity=0)
                self.stdout.write("Loaded the demo catalog.")
        if Instance.objects.filter(phone_number_id=DEMO_PHONE_NUMBER_ID, is_active=True).exists():
            try:
                created = demo_conversations_load(now=timezone.now())
            except DemoWouldLeaveTheMachine as exc:
                self.stdout.write(f"Demo conversations not loaded: {exc}.")
            else:
                if created:
                    self.stdout.write(f"Loaded {created} demo conversations.")
        user_model = get_user_model()
        if user_model.objects.filter(is_superuser=True).exists():
            return
        password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
        username = settings.ADMIN_USERNAME
        user_model.objects.create_superuser(
            username, settings.ADMIN_EMAIL or "admin@localhost", password
        )
        shown = "from ADMIN_PASSWORD" if settings.ADMIN_PASSWORD else password
        self.stdout.write(
            self.style.SUCCESS(f"Created superuser '{username}' with password: {shown}")
            + "\n(shown once; change it in the admin or set ADMIN_PASSWORD before `make run`)"
        )
