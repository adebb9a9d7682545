"""Instance access tokens encrypted at rest: ciphertext in the column, plaintext for the sender,
key rotation, a clear error for a wrong key, and a webhook path that never decrypts."""

from collections.abc import Callable

import pytest
from cryptography.fernet import Fernet, MultiFernet
from django.core import serializers
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations import publishers
from conversations.models import Direction, Instance, Message, Session
from conversations.privacy.encryption import FieldDecryptionError
from conversations.sending.worker import send_message
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    PHONE_NUMBER_ID,
    Recorder,
    fixture_bytes,
    signed_post,
)

pytestmark = pytest.mark.django_db

TOKEN = "EAAG-sentinel-instance-token-0123456789"
OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()
OTHER_KEY = Fernet.generate_key().decode()


def stored_token(instance: Instance) -> str:
    """The column as the database holds it, read without the model."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT access_token FROM {Instance._meta.db_table} WHERE id = %s", [instance.pk]
        )
        row = cursor.fetchone()
    assert row is not None
    token: str = row[0]
    return token


@pytest.fixture
def keys(settings: Settings) -> Callable[..., None]:
    """Set FIELD_ENCRYPTION_KEYS for the rest of the test: keys(NEW_KEY, OLD_KEY)."""

    def use(*new_keys: str) -> None:
        settings.FIELD_ENCRYPTION_KEYS = list(new_keys)

    use(OLD_KEY)
    return use


@pytest.fixture
def instance_with_token(keys: Callable[..., None]) -> Instance:
    return baker.make(
        Instance, phone_number_id=PHONE_NUMBER_ID, name="Laboratório Demo", access_token=TOKEN
    )


def test_the_column_holds_ciphertext_and_the_attribute_the_plaintext(
    instance_with_token: Instance,
) -> None:
    stored = stored_token(instance_with_token)

    assert TOKEN not in stored
    assert stored.startswith("gAAAAA")
    assert Fernet(OLD_KEY).decrypt(stored.encode()).decode() == TOKEN
    assert Instance.objects.get(pk=instance_with_token.pk).access_token == TOKEN


def test_an_instance_without_its_own_token_stores_an_empty_column(
    keys: Callable[..., None],
) -> None:
    instance = baker.make(Instance, access_token="")
    assert stored_token(instance) == ""
    loaded = Instance.objects.get(pk=instance.pk)
    assert (loaded.access_token, loaded.has_access_token) == ("", False)


def test_a_new_token_is_encrypted_anew_and_an_untouched_one_is_saved_as_it_was(
    instance_with_token: Instance,
) -> None:
    before = stored_token(instance_with_token)
    loaded = Instance.objects.get(pk=instance_with_token.pk)
    loaded.name = "Outro nome"
    loaded.save()
    assert stored_token(instance_with_token) == before  # never decrypted, never re-encrypted

    loaded.access_token = "EAAG-second-token"
    loaded.save()
    after = stored_token(instance_with_token)
    assert "EAAG-second-token" not in after
    assert Fernet(OLD_KEY).decrypt(after.encode()) == b"EAAG-second-token"


def test_the_sender_posts_the_plaintext_token_to_the_graph_api(
    fake_graph: FakeGraphAPI, instance_with_token: Instance
) -> None:
    session = baker.make(Session, instance=instance_with_token, customer_phone=CUSTOMER_PHONE)
    message = baker.make(Message, session=session, direction=Direction.OUTBOUND, content="Olá!")

    assert send_message.apply(args=(message.pk,)).get() == "sent"

    [request] = fake_graph.requests
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_rotation_with_two_keys_then_the_new_key_alone(
    keys: Callable[..., None], instance_with_token: Instance, capsys: pytest.CaptureFixture[str]
) -> None:
    second = baker.make(Instance, access_token="EAAG-second-token")
    keys(NEW_KEY, OLD_KEY)
    assert Instance.objects.get(pk=instance_with_token.pk).access_token == TOKEN

    call_command("rotate_field_encryption")

    assert capsys.readouterr().out == (
        "Re-encrypted 2 value(s) with the first key of FIELD_ENCRYPTION_KEYS.\n"
    )
    assert Fernet(NEW_KEY).decrypt(stored_token(instance_with_token).encode()).decode() == TOKEN
    keys(NEW_KEY)
    assert Instance.objects.get(pk=instance_with_token.pk).access_token == TOKEN
    assert Instance.objects.get(pk=second.pk).access_token == "EAAG-second-token"


def test_rotation_names_what_no_key_decrypts_and_rotates_the_rest(
    keys: Callable[..., None], instance_with_token: Instance, capsys: pytest.CaptureFixture[str]
) -> None:
    keys(OTHER_KEY)
    readable = baker.make(Instance, access_token="EAAG-readable")
    lost = stored_token(instance_with_token)
    keys(NEW_KEY, OTHER_KEY)

    with pytest.raises(CommandError) as raised:
        call_command("rotate_field_encryption")

    assert str(raised.value) == (
        f"1 value(s) could not be decrypted with any configured key and were left unchanged: "
        f"Instance #{instance_with_token.pk} access_token. Add back the key that encrypted them "
        "(after the first one), or store those values again."
    )
    assert capsys.readouterr().out.startswith("Re-encrypted 1 value(s)")
    assert stored_token(instance_with_token) == lost
    assert Fernet(NEW_KEY).decrypt(stored_token(readable).encode()) == b"EAAG-readable"


def test_a_wrong_key_gives_a_clear_error_where_the_token_is_read(
    keys: Callable[..., None], instance_with_token: Instance
) -> None:
    keys(OTHER_KEY)
    loaded = Instance.objects.get(pk=instance_with_token.pk)  # loading does not decrypt

    with pytest.raises(FieldDecryptionError) as raised:
        _ = loaded.access_token

    assert str(raised.value) == (
        f"Instance #{instance_with_token.pk} access_token cannot be decrypted with any of the 1 "
        "key(s) in FIELD_ENCRYPTION_KEYS: the key that encrypted it was removed or changed. Put "
        "that key back (after the first one), or store the value again."
    )
    assert loaded.has_access_token is True


def test_a_wrong_key_sends_nothing_and_leaves_the_message_unsent(
    keys: Callable[..., None], fake_graph: FakeGraphAPI, instance_with_token: Instance
) -> None:
    session = baker.make(Session, instance=instance_with_token, customer_phone=CUSTOMER_PHONE)
    message = baker.make(Message, session=session, direction=Direction.OUTBOUND, content="Olá!")
    keys(OTHER_KEY)

    with pytest.raises(FieldDecryptionError):
        send_message.apply(args=(message.pk,)).get()

    assert fake_graph.requests == []
    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == (None, "pending")


def test_serialised_instances_carry_the_ciphertext_and_load_back(
    instance_with_token: Instance,
) -> None:
    dumped = serializers.serialize("json", Instance.objects.filter(pk=instance_with_token.pk))
    assert TOKEN not in dumped
    Instance.objects.all().delete()

    for obj in serializers.deserialize("json", dumped):
        obj.save()

    assert Instance.objects.get(pk=instance_with_token.pk).access_token == TOKEN


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    turns, sends = Recorder(), Recorder()
    monkeypatch.setattr(publishers, "enqueue_turn", turns)
    monkeypatch.setattr(publishers, "enqueue_send", sends)
    return turns


@pytest.mark.parametrize("customer", ["known", "new"])
def test_the_webhook_stores_messages_without_decrypting_any_token(
    client: Client,
    keys: Callable[..., None],
    instance_with_token: Instance,
    enqueued: Recorder,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    customer: str,
) -> None:
    """A key that decrypts nothing: any decryption on the webhook's path would fail it. A known
    customer's text takes the one-statement path on PostgreSQL, a new one the general path."""
    if customer == "known":
        baker.make(
            Session,
            instance=instance_with_token,
            customer_phone=CUSTOMER_PHONE,
            customer_user_id=CUSTOMER_USER_ID,
        )
    keys(OTHER_KEY)

    with django_capture_on_commit_callbacks(execute=True):
        response = signed_post(client, fixture_bytes("text"))

    assert (response.status_code, response.content) == (200, b"ok")
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1
    assert len(enqueued.calls) == 1


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_stored_tokens_and_reversing_it_decrypts_them(
    keys: Callable[..., None],
) -> None:
    from django.db.migrations.executor import MigrationExecutor

    before = [("conversations", "0006_relturns_message_order_confirmation_data")]
    after = [("conversations", "0007_personal_data_and_token_encryption")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    old_apps.get_model("conversations", "Instance").objects.create(
        phone_number_id="100000000000009", name="Antiga", access_token=TOKEN
    )
    instance = Instance(pk=old_apps.get_model("conversations", "Instance").objects.get().pk)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        encrypted = stored_token(instance)
        assert Fernet(OLD_KEY).decrypt(encrypted.encode()).decode() == TOKEN

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        assert stored_token(instance) == TOKEN
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_multifernet_decrypts_with_any_key_and_encrypts_with_the_first() -> None:
    """The library contract rotation relies on (cryptography's MultiFernet)."""
    token = Fernet(OLD_KEY).encrypt(b"x")
    both = MultiFernet([Fernet(NEW_KEY), Fernet(OLD_KEY)])
    assert both.decrypt(token) == b"x"
    assert Fernet(NEW_KEY).decrypt(both.encrypt(b"y")) == b"y"
