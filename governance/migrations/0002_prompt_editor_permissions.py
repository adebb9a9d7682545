"""Prompt editors may start, cancel and read replays (docs/architecture.md, Prompt governance); Support gets none of it.

Superusers have every permission. The content types and permissions are created here, as in
`conversations/migrations/0002_staff_groups.py`, so the group gets them on the first `migrate`.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

PROMPT_EDITORS = "Prompt editors"
PROMPT_EDITOR_PERMISSIONS = (
    ("replayrun", "add_replayrun"),
    ("replayrun", "change_replayrun"),
    ("replayrun", "view_replayrun"),
    ("replayresult", "view_replayresult"),
)


def _permissions(apps, db):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for model, codename in PROMPT_EDITOR_PERMISSIONS
        for permission in Permission.objects.using(db).filter(
            content_type__app_label="governance", content_type__model=model, codename=codename
        )
    ]


def grant_to_prompt_editors(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    create_permissions(global_apps.get_app_config("governance"), verbosity=0, using=db, apps=apps)
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=PROMPT_EDITORS):
        group.permissions.add(*permissions)


def revoke_from_prompt_editors(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=PROMPT_EDITORS):
        group.permissions.remove(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0001_initial"),
        ("conversations", "0002_staff_groups"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(grant_to_prompt_editors, revoke_from_prompt_editors)]
