"""`manage.py bootstrap`: an idempotent first install with DEBUG=False — migrations checked, the
runtime configuration, the catalog while empty (without the demo instance), the first superuser
from ADMIN_* settings, and the next steps."""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from pytest_django import Settings

from conversations.models import Instance
from knowledge_base.models import KBPackage, Segment, Service
from prompts_admin.models import PromptOverride, RuntimeConfig

pytestmark = pytest.mark.django_db


def bootstrap(*args: str) -> list[str]:
    out = StringIO()
    call_command("bootstrap", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def credentials(settings: Settings) -> None:
    settings.DEBUG = False
    settings.ADMIN_USERNAME, settings.ADMIN_EMAIL = "operadora", "ti@lab.example"
    settings.ADMIN_PASSWORD = "uma-senha-longa-de-instalacao"


@pytest.mark.usefixtures("credentials")
def test_a_first_install_gets_its_configuration_catalog_and_superuser() -> None:
    RuntimeConfig.objects.all().delete()

    lines = bootstrap()

    assert lines[:4] == [
        "migrations: all applied",
        "runtime configuration: created",
        "catalog: loaded from demo",
        "superuser: created 'operadora'",
    ]
    assert lines[5] == "Next steps:"
    assert lines[6] == (
        "1. Sign in at https://<your host>/admin/ and add the Instance "
        "(/admin/conversations/instance/add/): Meta's phone number id and its access token."
    )
    assert (Segment.objects.count(), Service.objects.count(), KBPackage.objects.count()) == (
        4,
        9,
        4,
    )
    assert Instance.objects.count() == 0  # the demo instance is the developer's, not an install's
    assert KBPackage.history.count() == 4  # a first version to diff the first edit against
    user = User.objects.get()
    assert (user.username, user.email, user.is_superuser) == ("operadora", "ti@lab.example", True)
    assert user.check_password("uma-senha-longa-de-instalacao")
    assert RuntimeConfig.objects.count() == 1


@pytest.mark.usefixtures("credentials")
def test_a_second_run_changes_nothing() -> None:
    bootstrap()
    Segment.objects.update(label="Editado pela equipe")

    lines = bootstrap()

    assert lines[:4] == [
        "migrations: all applied",
        "runtime configuration: present",
        "catalog: already has segments, services or packages; left as is",
        "superuser: one exists; left as is",
    ]
    assert set(Segment.objects.values_list("label", flat=True)) == {"Editado pela equipe"}
    assert User.objects.count() == 1
    assert PromptOverride.objects.count() == 0


def test_without_a_password_it_creates_no_superuser_and_says_how(settings: Settings) -> None:
    settings.ADMIN_PASSWORD = ""

    with pytest.raises(CommandError) as refused:
        bootstrap()

    assert str(refused.value) == (
        "no superuser yet: set ADMIN_PASSWORD (and ADMIN_USERNAME, ADMIN_EMAIL) and run "
        "bootstrap again, or run `python manage.py createsuperuser`."
    )
    assert User.objects.count() == 0


@pytest.mark.usefixtures("credentials")
def test_it_refuses_to_run_before_the_migrations() -> None:
    recorder = MigrationRecorder(connection)
    latest = recorder.migration_qs.filter(app="conversations").order_by("-name").first()
    assert latest is not None
    name, applied = latest.name, latest.applied
    latest.delete()
    try:
        with pytest.raises(CommandError) as refused:
            bootstrap()
    finally:
        recorder.migration_qs.create(app="conversations", name=name, applied=applied)

    assert str(refused.value) == (
        "1 migration(s) not applied: run `python manage.py migrate` first."
    )
    assert User.objects.count() == 0
