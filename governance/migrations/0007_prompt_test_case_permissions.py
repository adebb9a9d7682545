"""Prompt editors save, edit and read prompt test cases, and run and read their runs
(docs/architecture.md, Prompt test cases); Support gets none of it. As in
`0002_prompt_editor_permissions.py`, the permissions are created here so the group gets them on
the first `migrate`.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

PROMPT_EDITORS = "Prompt editors"
PROMPT_EDITOR_PERMISSIONS = (
    ("prompttestcase", "add_prompttestcase"),
    ("prompttestcase", "change_prompttestcase"),
    ("prompttestcase", "view_prompttestcase"),
    ("prompttestrun", "add_prompttestrun"),
    ("prompttestrun", "view_prompttestrun"),
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
        ("governance", "0006_prompt_test_cases"),
        ("governance", "0002_prompt_editor_permissions"),
    ]

    operations = [migrations.RunPython(grant_to_prompt_editors, revoke_from_prompt_editors)]
