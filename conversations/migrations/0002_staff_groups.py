"""The two staff groups with their exact permission sets (DESIGN.md §12).

Permissions are normally created by a post_migrate handler, after every migration ran; this
migration creates the content types and permissions of the three apps itself, so the groups get
their permissions on the very first `migrate` of an empty database.

Neither group may delete: catalog entries, packages and prompts are deactivated instead, so
their history stays readable and sessions that name a code still resolve it. Instances (with
their access tokens) stay with superusers.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

PROMPT_EDITORS = "Prompt editors"
SUPPORT = "Support"

CONVERSATION_LOGS = (
    "instance",
    "session",
    "message",
    "deliverystatusevent",
    "webhookdelivery",
    "llmcall",
    "handoffsummary",
    "lead",
)

# group -> app label -> model -> actions
GROUP_PERMISSIONS: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {
    PROMPT_EDITORS: {
        "prompts_admin": {
            "promptoverride": ("add", "change", "view"),
            "runtimeconfig": ("change", "view"),
            "strategiccompany": ("add", "change", "view"),
        },
        "knowledge_base": {
            "kbpackage": ("add", "change", "view"),
            "segment": ("add", "change", "view"),
            "intent": ("add", "change", "view"),
            "service": ("add", "change", "view"),
        },
        "conversations": {
            model: ("view",) for model in CONVERSATION_LOGS if model != "webhookdelivery"
        },
    },
    SUPPORT: {
        "conversations": {model: ("view",) for model in CONVERSATION_LOGS},
        "knowledge_base": {
            "kbpackage": ("view",),
            "segment": ("view",),
            "intent": ("view",),
            "service": ("view",),
        },
        "prompts_admin": {"strategiccompany": ("view",)},
    },
}


def create_groups(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    for label in ("conversations", "knowledge_base", "prompts_admin"):
        # The real AppConfig says "this app has models"; `apps` gives the models as of this
        # migration, so later model changes cannot break it.
        create_permissions(global_apps.get_app_config(label), verbosity=0, using=db, apps=apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group_name, per_app in GROUP_PERMISSIONS.items():
        wanted = [
            (app_label, f"{action}_{model}")
            for app_label, models in per_app.items()
            for model, actions in models.items()
            for action in actions
        ]
        permissions = [
            Permission.objects.using(db).get(content_type__app_label=app_label, codename=codename)
            for app_label, codename in wanted
        ]
        group, _created = Group.objects.using(db).get_or_create(name=group_name)
        group.permissions.set(permissions)


def delete_groups(apps, schema_editor) -> None:
    Group = apps.get_model("auth", "Group")
    Group.objects.using(schema_editor.connection.alias).filter(
        name__in=list(GROUP_PERMISSIONS)
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("conversations", "0001_initial"),
        ("knowledge_base", "0001_initial"),
        ("prompts_admin", "0001_initial"),
    ]

    operations = [migrations.RunPython(create_groups, delete_groups)]
