"""Secrets kept in the database, encrypted at rest: the instances' WhatsApp access tokens.

`EncryptedTextField` stores Fernet tokens (AES-128-CBC + HMAC-SHA256) made with the keys of
`FIELD_ENCRYPTION_KEYS`: the first key encrypts, every key decrypts (cryptography's MultiFernet),
so a key is rotated by putting the new one first, re-encrypting (`manage.py
rotate_field_encryption`) and then dropping the old one.

The value is decrypted when code reads the attribute (`instance.access_token` is the plaintext),
not when the row is loaded: loading, listing or saving an Instance costs no decryption, and a
key problem surfaces only where the token is used (the sender), with an error that says what to
do. An empty value is stored empty (no token: the sender falls back to WHATSAPP_ACCESS_TOKEN).
`values()` and `values_list()` return the stored `Ciphertext`, never the plaintext.
"""

import base64
import binascii
import functools
from dataclasses import dataclass, field
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.apps import apps
from django.conf import settings
from django.db import models

from compat.django_private import DeferredAttribute


class FieldDecryptionError(Exception):
    """A stored value that none of the configured keys decrypts."""


@dataclass(frozen=True, slots=True)
class Ciphertext:
    """A value as stored, not decrypted yet."""

    token: str

    def __repr__(self) -> str:
        return "Ciphertext(…)"


@functools.lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def field_cipher() -> MultiFernet:
    """The keys of FIELD_ENCRYPTION_KEYS (settings checked their format at startup)."""
    return _multi_fernet(tuple(settings.FIELD_ENCRYPTION_KEYS))


def encrypt(plaintext: str) -> str:
    return field_cipher().encrypt(plaintext.encode()).decode()


def decrypt(token: str, *, what: str) -> str:
    """The plaintext of a stored token; `what` names the value in the error."""
    try:
        return field_cipher().decrypt(token.encode()).decode()
    except InvalidToken:
        count = len(settings.FIELD_ENCRYPTION_KEYS)
        raise FieldDecryptionError(
            f"{what} cannot be decrypted with any of the {count} key(s) in "
            "FIELD_ENCRYPTION_KEYS: the key that encrypted it was removed or changed. Put that "
            "key back (after the first one), or store the value again."
        ) from None


def rotate(token: str, *, what: str) -> str:
    """The same value encrypted with the first key (MultiFernet.rotate)."""
    try:
        return field_cipher().rotate(token.encode()).decode()
    except InvalidToken:
        decrypt(token, what=what)  # raises the explanatory error
        raise


def looks_encrypted(value: str) -> bool:
    """Whether a stored value has the shape of a Fernet token (version byte 0x80, HMAC-sized).

    WhatsApp tokens (``EAA…``) never have it; the data migration uses this to encrypt only what
    is still plaintext.
    """
    try:
        raw = base64.urlsafe_b64decode(value.encode())
    except (binascii.Error, ValueError):
        return False
    return len(raw) >= 73 and raw[0] == 0x80 and (len(raw) - 57) % 16 == 0


class _DecryptingAttribute(DeferredAttribute):
    """Decrypts the stored value on first read and keeps the plaintext on the instance.

    A data descriptor (it has `__set__`): Django's plain field attribute is not, and Python
    would then read the value from the instance's `__dict__` without calling `__get__`.
    """

    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__[self.field.attname] = value

    def __get__(self, instance: Any, cls: Any = None) -> Any:
        value = super().__get__(instance, cls)
        if instance is None or not isinstance(value, Ciphertext):
            return value
        field = self.field
        plaintext = decrypt(value.token, what=f"{field.model.__name__} #{instance.pk} {field.name}")
        instance.__dict__[field.attname] = plaintext
        return plaintext


class EncryptedTextField(models.TextField[str, str]):
    """A text column holding a Fernet token of the value; the attribute reads as plaintext."""

    descriptor_class = _DecryptingAttribute

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        if not value:
            return ""
        return Ciphertext(value)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # The stored value as it is: saving an instance that never read its token re-uses the
        # ciphertext (no decryption, no new token).
        return model_instance.__dict__.get(self.attname, "")

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, Ciphertext):
            return value.token
        value = super().get_prep_value(value)
        if not value:
            return ""
        return encrypt(value)

    def to_python(self, value: Any) -> Any:
        # What `value_to_string` wrote (loaddata) stays the stored token; a plaintext stays
        # plaintext (model validation hands the decrypted value back here).
        if isinstance(value, str) and looks_encrypted(value):
            return Ciphertext(value)
        return value

    def value_to_string(self, obj: models.Model) -> str:
        # Serialisation (dumpdata) writes the ciphertext, never the plaintext.
        value = obj.__dict__.get(self.attname, "")
        if isinstance(value, Ciphertext):
            return value.token
        return encrypt(value) if value else ""


@dataclass
class RotationReport:
    rotated: int = 0
    # "<Model> #<pk> <field>" of each stored value no configured key decrypts (left unchanged).
    undecryptable: list[str] = field(default_factory=list)


def encrypted_fields_rotate() -> RotationReport:
    """Re-encrypt every stored value of every `EncryptedTextField` with the first key.

    Run after putting a new key first in FIELD_ENCRYPTION_KEYS, before dropping the old one.
    Each value is rewritten only if it is still the one read (a token changed meanwhile was
    already encrypted with the first key); plaintext never leaves this process.
    """
    report = RotationReport()
    for model in apps.get_models():
        for model_field in model._meta.concrete_fields:
            if not isinstance(model_field, EncryptedTextField):
                continue
            name = model_field.attname
            manager = model._base_manager
            rows = manager.exclude(**{name: ""}).values_list("pk", name).order_by("pk")
            for pk, stored in rows:
                what = f"{model.__name__} #{pk} {model_field.name}"
                try:
                    rotated = rotate(stored.token, what=what)
                except FieldDecryptionError:
                    report.undecryptable.append(what)
                    continue
                manager.filter(pk=pk, **{name: stored}).update(**{name: Ciphertext(rotated)})
                report.rotated += 1
    return report
