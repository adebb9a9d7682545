"""What a data migration that gives a staff group an app's permissions runs.

Django creates permissions after the whole `migrate`, so a migration that grants them creates them
first (`create_permissions`); the group is created when it is missing, so a fresh database and
one that predates the group end the same.
"""

from collections.abc import Sequence
from typing import Any

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations


def group_permissions_operation(
    *, app_label: str, group: str, codenames: Sequence[str]
) -> migrations.RunPython:
    """A `RunPython` that gives `group` the permissions `codenames` of `app_label` (and takes
    them back when unapplied)."""

    def permissions(apps: Any, db: str) -> list[Any]:
        permission = apps.get_model("auth", "Permission")
        return list(
            permission.objects.using(db).filter(
                content_type__app_label=app_label, codename__in=list(codenames)
            )
        )

    def grant(apps: Any, schema_editor: Any) -> None:
        db = schema_editor.connection.alias
        config = global_apps.get_app_config(app_label)
        create_permissions(config, verbosity=0, using=db, apps=apps)
        group_model = apps.get_model("auth", "Group")
        row, _created = group_model.objects.using(db).get_or_create(name=group)
        row.permissions.add(*permissions(apps, db))

    def revoke(apps: Any, schema_editor: Any) -> None:
        db = schema_editor.connection.alias
        group_model = apps.get_model("auth", "Group")
        for row in group_model.objects.using(db).filter(name=group):
            row.permissions.remove(*permissions(apps, db))

    return migrations.RunPython(grant, revoke)
