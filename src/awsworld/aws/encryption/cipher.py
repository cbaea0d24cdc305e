"""AES-256-GCM sealing of one value or stream chunk with a run's data key.

A sealed value is ``nonce (12 bytes) || ciphertext || tag (16 bytes)``. The associated data binds it to where
it belongs (the run, and for a stream chunk the stream), so a sealed value copied into another run or stream
fails authentication instead of being read as that run's data. Nonces are random: a run's key seals far
fewer than the 2**32 values GCM allows per key with random nonces.
"""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ...world.errors import WorldError

NONCE_BYTES = 12
OVERHEAD = NONCE_BYTES + 16
"""Bytes a sealed value adds to its plaintext."""


class UnreadableValueError(WorldError):
    """A sealed value failed authentication: it was altered, or it belongs to another run or stream."""


class RunCipher:
    """One run's data key, ready to seal and open."""

    __slots__ = ("_aead", "run_id")

    def __init__(self, run_id: str, key: bytes) -> None:
        self.run_id = run_id
        self._aead = AESGCM(key)

    def _aad(self, scope: str) -> bytes:
        return f"awsworld:{self.run_id}:{scope}".encode()

    def seal(self, plaintext: bytes, scope: str = "value") -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, self._aad(scope))

    def open(self, sealed: bytes, scope: str = "value") -> bytes:
        try:
            return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], self._aad(scope))
        except (InvalidTag, ValueError):
            raise UnreadableValueError(
                f"an encrypted {scope} of run {self.run_id} failed authentication (altered, or not this run's)"
            ) from None

    def seal_text(self, plaintext: bytes, scope: str = "value") -> str:
        """Sealed, as base64 text: how an encrypted value rides inline in a DynamoDB item's JSON."""
        return base64.b64encode(self.seal(plaintext, scope)).decode("ascii")

    def open_text(self, sealed: str, scope: str = "value") -> bytes:
        return self.open(base64.b64decode(sealed), scope)
