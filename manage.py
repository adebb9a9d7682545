#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys

# Commands that author the code base and never serve or touch production data: they run on a
# fresh clone without a .env or secrets (DEBUG defaults to on for them only). Every other
# command keeps the production default, which refuses to start without its secrets.
AUTHORING_COMMANDS = frozenset({"makemigrations", "makemessages", "compilemessages"})


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if len(sys.argv) > 1 and sys.argv[1] in AUTHORING_COMMANDS:
        os.environ.setdefault("DEBUG", "True")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
