"""`python manage.py bootstrap [--catalog FILE]`: prepare an install (any DEBUG), idempotently —
check the migrations, create the runtime configuration, load the catalog when it is empty,
create the first superuser from ADMIN_USERNAME / ADMIN_PASSWORD / ADMIN_EMAIL, and print the
next steps (conversations.bootstrap)."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.bootstrap import (
    BootstrapError,
    catalog_load,
    migrations_check,
    runtime_config_ensure,
    superuser_ensure,
)


class Command(BaseCommand):
    help = "Prepare an install: runtime configuration, catalog, first superuser; safe to rerun."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--catalog",
            metavar="FILE",
            help="a fixture with the catalog to load while it is empty (default: the demo "
            "catalog, without its demo instance)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            steps = [
                migrations_check(),
                runtime_config_ensure(),
                catalog_load(fixture=options["catalog"], with_demo_instance=False),
                superuser_ensure(
                    username=settings.ADMIN_USERNAME,
                    email=settings.ADMIN_EMAIL,
                    password=settings.ADMIN_PASSWORD,
                ),
            ]
        except BootstrapError as exc:
            raise CommandError(str(exc)) from None
        for step in steps:
            self.stdout.write(f"{step.name}: {step.detail}")
        admin = f"/{settings.ADMIN_URL}"
        self.stdout.write(
            "\nNext steps:\n"
            f"1. Sign in at https://<your host>{admin} and add the Instance "
            f"({admin}conversations/instance/add/): Meta's phone number id and its access "
            "token.\n"
            "2. At Meta, point the app's webhook to https://<your host>/webhooks/whatsapp/ with "
            "WHATSAPP_VERIFY_TOKEN, subscribed to `messages`.\n"
            "3. Put staff in the Support and Prompt editors groups (Prompt approvers approve "
            "releases); forgotten password: "
            "`python manage.py changepassword <username>`."
        )
