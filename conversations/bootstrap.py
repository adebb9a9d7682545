"""The steps of a first install, shared by `manage.py bootstrap` (any install, `DEBUG=False`
included) and `manage.py bootstrap_dev` (a developer machine: plus the demo instance and
conversations and a generated password). Each step is idempotent: it says what it did, or that
there was nothing to do.
"""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from knowledge_base.models import KBPackage, Segment, Service
from prompts_admin.models import RuntimeConfig

# The demo fixture's catalog (segments, intents, services with their parameter schemas, knowledge
# packages) and runtime configuration; its demo Instance is left out on a real install.
DEFAULT_CATALOG = "demo"
DEMO_ONLY_MODELS = ("conversations.Instance",)


class BootstrapError(Exception):
    """A step cannot run; the message says what to do (English, for an operator's terminal)."""


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    done: bool  # False: there was nothing to do
    detail: str


def migrations_check() -> Step:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        raise BootstrapError(
            f"{len(plan)} migration(s) not applied: run `python manage.py migrate` first."
        )
    return Step("migrations", False, "all applied")


def runtime_config_ensure() -> Step:
    existed = RuntimeConfig.objects.filter(pk=RuntimeConfig.SINGLETON_PK).exists()
    RuntimeConfig.load()
    return Step("runtime configuration", not existed, "present" if existed else "created")


def catalog_is_empty() -> bool:
    return not (Segment.objects.exists() or Service.objects.exists() or KBPackage.objects.exists())


def catalog_load(*, fixture: str | None, with_demo_instance: bool) -> Step:
    """Load `fixture` (a path, or the demo catalog) while the catalog is empty, with a first
    history version of each versioned row so the first admin edit can be diffed and reverted."""
    if not catalog_is_empty():
        return Step("catalog", False, "already has segments, services or packages; left as is")
    name = fixture or DEFAULT_CATALOG
    excluded = [] if with_demo_instance or fixture else [f"--exclude={m}" for m in DEMO_ONLY_MODELS]
    call_command("loaddata", name, *excluded, verbosity=0)
    # loaddata writes no history; populate_history skips models that already have history.
    call_command("populate_history", "--auto", verbosity=0)
    return Step("catalog", True, f"loaded from {name}")


def superuser_ensure(*, username: str, email: str, password: str) -> Step:
    """A superuser from the given credentials while none exists; never a generated password
    here (an operator's terminal output is often kept)."""
    users = get_user_model()
    if users.objects.filter(is_superuser=True).exists():
        return Step("superuser", False, "one exists; left as is")
    if not password:
        raise BootstrapError(
            "no superuser yet: set ADMIN_PASSWORD (and ADMIN_USERNAME, ADMIN_EMAIL) and run "
            "bootstrap again, or run `python manage.py createsuperuser`."
        )
    users.objects.create_superuser(username, email, password)
    return Step("superuser", True, f"created '{username}'")
