"""`X-Hub-Signature-256` of a webhook POST: HMAC-SHA256 of the raw body with the app secret.

Meta sends ``sha256=<lowercase hex digest>``. Pure module.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "X-Hub-Signature-256"
SIGNATURE_PREFIX = "sha256="


def compute_signature(*, body: bytes, secret: str) -> str:
    """The header value Meta would send for `body` (also used by tests and the benchmark)."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return SIGNATURE_PREFIX + digest


def signature_is_valid(*, body: bytes, header: str | None, secret: str) -> bool:
    """True only for ``sha256=<hex>`` matching the body; compared in constant time.

    An empty secret never validates: a misconfigured deployment must refuse every POST rather
    than accept unsigned ones.
    """
    if not secret or not header or not header.startswith(SIGNATURE_PREFIX):
        return False
    expected = compute_signature(body=body, secret=secret).encode("ascii")
    # Compare bytes: `hmac.compare_digest` refuses non-ASCII str, and a header is attacker input.
    received = header.encode("utf-8", errors="replace")
    return hmac.compare_digest(expected, received)
