import hashlib
import hmac

import pytest

from whatsapp.signature import compute_signature, signature_is_valid

BODY = b'{"object":"whatsapp_business_account","entry":[]}'
SECRET = "app-secret"
GOOD = "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()


def test_the_computed_signature_is_meta_s_header_format() -> None:
    assert compute_signature(body=BODY, secret=SECRET) == GOOD


@pytest.mark.parametrize(
    ("header", "secret", "valid"),
    [
        (GOOD, SECRET, True),
        (GOOD, "other-secret", False),
        (None, SECRET, False),
        ("", SECRET, False),
        (GOOD.removeprefix("sha256="), SECRET, False),  # no prefix
        ("sha1=" + GOOD.removeprefix("sha256="), SECRET, False),  # wrong prefix
        ("SHA256=" + GOOD.removeprefix("sha256="), SECRET, False),
        (GOOD[:-1], SECRET, False),  # truncated digest
        (GOOD + "0", SECRET, False),
        ("sha256=" + "é" * 64, SECRET, False),  # non-ASCII never raises
        (GOOD, "", False),  # an unset secret accepts nothing
    ],
)
def test_signature_check(header: str, secret: str, valid: bool) -> None:
    assert signature_is_valid(body=BODY, header=header, secret=secret) is valid


def test_a_changed_body_does_not_match_the_signature() -> None:
    assert signature_is_valid(body=BODY + b" ", header=GOOD, secret=SECRET) is False
