"""Prompt editors prepare and publish releases; the Prompt approvers group approves another
editor's release when PROMPT_APPROVAL_REQUIRED is on (docs/decisions/0060). Support gets none."""

from django.db import migrations

from staff_auth.permission_migrations import group_permissions_operation


class Migration(migrations.Migration):
    dependencies = [
        ("prompts_admin", "0006_release"),
        ("conversations", "0002_staff_groups"),
    ]

    operations = [
        group_permissions_operation(
            app_label="prompts_admin",
            group="Prompt editors",
            codenames=("add_release", "change_release", "view_release"),
        ),
        group_permissions_operation(
            app_label="prompts_admin",
            group="Prompt approvers",
            codenames=("approve_release", "view_release"),
        ),
    ]
