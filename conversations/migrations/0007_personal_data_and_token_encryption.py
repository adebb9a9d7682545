"""Personal data in the admin and access tokens at rest (docs/operations.md, Personal data in the admin (LGPD)).

- `conversations.view_personal_data` (on Session) governs unmasked display; Support gets it,
  prompt editors do not (superusers have every permission).
- `Instance.access_token` becomes an encrypted column (text: a Fernet token is longer than the
  512 characters it encrypts) and the tokens already stored are encrypted with the first key of
  FIELD_ENCRYPTION_KEYS; reversing decrypts them again.

The tokens are read and written with SQL, not the historical model, whose field would try to
decrypt the plaintext it is about to encrypt.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations

import conversations.privacy.encryption
from conversations.privacy.encryption import decrypt, encrypt, looks_encrypted

SUPPORT = "Support"
PERMISSION = "view_personal_data"


def grant_personal_data_to_support(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    create_permissions(
        global_apps.get_app_config("conversations"), verbosity=0, using=db, apps=apps
    )
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.using(db).get(
        content_type__app_label="conversations", codename=PERMISSION
    )
    for group in Group.objects.using(db).filter(name=SUPPORT):
        group.permissions.add(permission)


def revoke_personal_data_from_support(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    permission = Permission.objects.using(db).filter(
        content_type__app_label="conversations", codename=PERMISSION
    ).first()
    if permission is not None:
        for group in Group.objects.using(db).filter(name=SUPPORT):
            group.permissions.remove(permission)


def _rewrite_tokens(apps, schema_editor, convert) -> None:
    Instance = apps.get_model("conversations", "Instance")
    connection = schema_editor.connection
    quote = connection.ops.quote_name
    table = quote(Instance._meta.db_table)
    column = quote(Instance._meta.get_field("access_token").column)
    pk = quote(Instance._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {pk}, {column} FROM {table} WHERE {column} <> ''")
        rows = cursor.fetchall()
        for instance_id, stored in rows:
            new = convert(instance_id, stored)
            if new != stored:
                cursor.execute(
                    f"UPDATE {table} SET {column} = %s WHERE {pk} = %s", [new, instance_id]
                )


def encrypt_tokens(apps, schema_editor) -> None:
    def convert(instance_id, stored: str) -> str:
        if looks_encrypted(stored):
            decrypt(stored, what=f"Instance #{instance_id} access_token")  # a wrong key stops here
            return stored
        return encrypt(stored)

    _rewrite_tokens(apps, schema_editor, convert)


def decrypt_tokens(apps, schema_editor) -> None:
    def convert(instance_id, stored: str) -> str:
        if not looks_encrypted(stored):
            return stored
        return decrypt(stored, what=f"Instance #{instance_id} access_token")

    _rewrite_tokens(apps, schema_editor, convert)


class Migration(migrations.Migration):

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("conversations", "0006_relturns_message_order_confirmation_data"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="session",
            options={
                "ordering": ["-last_message_at", "-id"],
                "permissions": [("view_personal_data", "Can view customers' personal data")],
                "verbose_name": "conversation",
                "verbose_name_plural": "conversations",
            },
        ),
        migrations.AlterField(
            model_name="instance",
            name="access_token",
            field=conversations.privacy.encryption.EncryptedTextField(
                blank=True,
                help_text="Optional; empty uses WHATSAPP_ACCESS_TOKEN. Never displayed.",
                verbose_name="access token",
            ),
        ),
        migrations.RunPython(grant_personal_data_to_support, revoke_personal_data_from_support),
        migrations.RunPython(encrypt_tokens, decrypt_tokens),
    ]
