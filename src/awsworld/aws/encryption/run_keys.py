"""Each run's data key: made once with KMS ``GenerateDataKey``, kept wrapped beside the run, unwrapped with
KMS ``Decrypt`` at most once per run per process.

The wrapped key lives in its own item of the run's partition (``RUN#<id>`` / ``DATAKEY``), put with
``attribute_not_exists`` before the run's first write. Whichever creator wins (a client's idempotent start, a
resilient start, a racing retry), every writer of the run then finds the same key, and the run head, which
every step rewrites and DynamoDB bills by the KB, carries nothing extra. The item lives as long as any item
of the run may (``aws/retention.py``).

KMS binds the wrapped key to its table and run through the encryption context, so a role can be limited to
this stack's runs (the template's ``kms:EncryptionContext:awsworld:table`` condition) and a wrapped key
copied to another run does not unwrap there.

A run is encrypted exactly when it has a data key. Reading a run (``runs.get``: the flow function's first
read of every delivery) fetches the key item in the same BatchGetItem, so a process learns whether a run is
encrypted without a request of its own. A writer that has not read the run looks the key up only when this
process is configured with a KMS key; a reader looks it up when it meets a sealed value.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import ClientError

from ...world.errors import WorldError
from ..config import AWSConfig
from ..keys import run_pk
from ..resources import PK, SK, TTL_ATTRIBUTE
from ..retention import Retention
from ..threaded import AsyncClient

if TYPE_CHECKING:
    from .cipher import RunCipher

DATA_KEY_SK = "DATAKEY"
TABLE_CONTEXT_KEY = "awsworld:table"
RUN_CONTEXT_KEY = "awsworld:run"
_CACHED = 4096


class EncryptionKeyError(WorldError):
    """KMS refused to make or unwrap a run's data key (no permission, key disabled or deleted), or an encrypted
    run's data key item is gone. ``lost``: the run's key cannot be used until someone acts on the key or its
    grants (a refusal KMS gives for good, or no key item), not a passing fault (throttling, KMS's own errors):
    what an operator's ``fail`` of such a run stores its error unsealed for (``aws/values.py``)."""

    def __init__(self, message: str, *, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost


#: KMS's refusals to unwrap a run's data key that no retry changes: the run's key is lost to this caller.
LOST_KEY_CODES = frozenset({"AccessDeniedException", "DisabledException", "KMSInvalidStateException",
                            "NotFoundException", "InvalidCiphertextException", "IncorrectKeyException"})


def unreadable_error(error: EncryptionKeyError) -> dict[str, str]:
    """What a read that shows no values (``resolve_data="none"``) gives for an error it shows all the same (a failed
    run's, a step's) that it cannot decrypt: a readable error saying so, rather than the read failing whole (one
    such failed run made every listing of runs fail: ``awsworld runs``, the viewer's list, ``describe``). A read
    of values still raises ``EncryptionKeyError``."""
    return {"name": "EncryptionKeyError", "message": f"this error cannot be read: {error}"}


def data_key_key(run_id: str) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: DATA_KEY_SK}


def _cipher(run_id: str, key: bytes) -> RunCipher:
    """The run's cipher. ``cipher`` (and with it ``cryptography``, a tenth of the flow function's import
    time) is imported by the first run that has a key: most stacks encrypt nothing, and a delivery of a
    plain run never needs it. A leaf import: ``cipher`` imports nothing of awsworld.aws."""
    from .cipher import RunCipher

    return RunCipher(run_id, key)


class KeyClients(Protocol):
    """What the data keys need of the World's clients (``aws/clients.py``'s ``AWSClients``, which holds the
    ``RunKeys``): its configuration, the retention rule, and the DynamoDB and KMS clients."""

    config: AWSConfig
    retention: Retention

    async def dynamodb(self) -> AsyncClient: ...

    async def kms(self) -> AsyncClient: ...


class RunKeys:
    """The data keys of the runs this process touches (LRU): a run's cipher, its wrapped key not yet unwrapped
    (bytes), or ``None`` for a run known to have none."""

    def __init__(self, clients: KeyClients) -> None:
        self._clients = clients
        self._known: OrderedDict[str, RunCipher | bytes | None] = OrderedDict()
        # The KMS key each run's data key was made under (the item's ``kid``), for a refusal to unwrap it: after a
        # change of AWSWORLD_KMS_KEY_ID (or in a reader that has none) it is the one to name, not the setting.
        self._key_ids: dict[str, str] = {}
        self._pending: dict[str, asyncio.Future[RunCipher | None]] = {}

    @property
    def enabled(self) -> bool:
        """Whether new runs get a data key (``AWSWORLD_KMS_KEY_ID`` is set)."""
        return bool(self._clients.config.kms_key_id)

    def _context(self, run_id: str) -> dict[str, str]:
        return {TABLE_CONTEXT_KEY: self._clients.config.table_name, RUN_CONTEXT_KEY: run_id}

    def knows(self, run_id: str) -> bool:
        return run_id in self._known

    def learn(self, run_id: str, item: dict[str, Any] | None) -> None:
        """What a read of the run's ``DATAKEY`` item found (None: the run has no data key)."""
        if run_id in self._known:
            return
        wrapped = (item or {}).get("dk")
        if item and isinstance(item.get("kid"), str):
            self._key_ids[run_id] = item["kid"]
        self._remember(run_id, bytes(getattr(wrapped, "value", wrapped)) if wrapped is not None else None)

    def _remember(self, run_id: str, cipher: RunCipher | bytes | None) -> None:
        self._known[run_id] = cipher
        self._known.move_to_end(run_id)
        while len(self._known) > _CACHED:
            self._key_ids.pop(self._known.popitem(last=False)[0], None)

    async def create(self, run_id: str, retention_seconds: int) -> None:
        """Before a run is created: make sure it has a data key (this one, or the one a racing creator put)."""
        if not self.enabled or self._known.get(run_id) is not None:
            return
        kms = await self._clients.kms()
        try:
            made = await kms.generate_data_key(KeyId=self._clients.config.kms_key_id, KeySpec="AES_256",
                                               EncryptionContext=self._context(run_id))
        except ClientError as error:
            raise _kms_error("make a data key for", run_id, error, self._clients.config.kms_key_id) from error
        now = datetime.now(UTC).isoformat()
        ttl = self._clients.retention.item_ttl(run_id, now, retention_seconds)
        ddb = await self._clients.dynamodb()
        try:
            await ddb.put_item(
                TableName=self._clients.config.table_name, ConditionExpression="attribute_not_exists(pk)",
                ReturnConsumedCapacity="TOTAL",
                Item={PK: {"S": run_pk(run_id)}, SK: {"S": DATA_KEY_SK}, "dk": {"B": made["CiphertextBlob"]},
                      "kid": {"S": made["KeyId"]}, "createdAt": {"S": now}, TTL_ATTRIBUTE: {"N": str(ttl)}})
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            self._known.pop(run_id, None)
            await self._lookup(run_id)  # another creator's key won: use it
            return
        self._remember(run_id, _cipher(run_id, made["Plaintext"]))

    async def for_writing(self, run_id: str) -> RunCipher | None:
        """The key to seal a new value of the run with, or None when the run is stored in plain text."""
        if run_id in self._known:
            self._known.move_to_end(run_id)
            known = self._known[run_id]
            return known if not isinstance(known, bytes) else await self._lookup(run_id)
        if not self.enabled:
            return None
        return await self._lookup(run_id)

    async def for_reading(self, run_id: str) -> RunCipher:
        """The key a sealed value of the run opens with."""
        known = self._known.get(run_id)
        cipher = known if known is not None and not isinstance(known, bytes) else await self._lookup(
            run_id, fresh=run_id in self._known and known is None)
        if cipher is None:
            raise EncryptionKeyError(f"run {run_id} has encrypted values but no data key item ({DATA_KEY_SK})",
                                     lost=True)
        return cipher

    async def _lookup(self, run_id: str, *, fresh: bool = False) -> RunCipher | None:
        """Read and unwrap the run's key once, however many callers ask at the same time."""
        if fresh:  # known to have no key, yet a sealed value was met: read the key item again
            self._known.pop(run_id, None)
        pending = self._pending.get(run_id)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._pending[run_id] = pending
            try:
                cipher = await self._unwrap(run_id)
            except BaseException as error:
                pending.set_exception(error)
                pending.exception()  # retrieved: a caller that gave up does not log "never retrieved"
                raise
            finally:
                self._pending.pop(run_id, None)
            self._remember(run_id, cipher)
            pending.set_result(cipher)
            return cipher
        return await asyncio.shield(pending)

    async def _unwrap(self, run_id: str) -> RunCipher | None:
        wrapped = self._known.get(run_id)
        if not isinstance(wrapped, bytes):  # not read with the run: read it now
            ddb = await self._clients.dynamodb()
            response = await ddb.get_item(TableName=self._clients.config.table_name, ConsistentRead=True,
                                          ReturnConsumedCapacity="TOTAL", ProjectionExpression="dk, kid",
                                          Key={PK: {"S": run_pk(run_id)}, SK: {"S": DATA_KEY_SK}})
            item: dict[str, Any] | None = response.get("Item")
            if not item:
                return None
            wrapped = item["dk"]["B"]
            if "kid" in item:
                self._key_ids[run_id] = item["kid"]["S"]
        kms = await self._clients.kms()
        try:
            opened = await kms.decrypt(CiphertextBlob=wrapped, EncryptionContext=self._context(run_id))
        except ClientError as error:
            raise _kms_error("unwrap the data key of", run_id, error, self._key_ids.get(run_id)) from error
        return _cipher(run_id, opened["Plaintext"])


def _kms_error(doing: str, run_id: str, error: ClientError, key_id: str | None) -> EncryptionKeyError:
    """The refusal with what to do. Making a key uses AWSWORLD_KMS_KEY_ID; unwrapping one uses the key the run's
    data key was made under (its item's ``kid``), which is another key once the setting has changed (a new
    PayloadKmsKeyArn) and which a reader needs ``kms:Decrypt`` on whatever its own setting says."""
    code = error.response.get("Error", {}).get("Code", "")
    if doing.startswith("make"):
        key = f"AWSWORLD_KMS_KEY_ID ({key_id})"
        hint = {
            "AccessDeniedException": f"this role needs kms:GenerateDataKey and kms:Decrypt on {key}",
            "DisabledException": f"the KMS key {key} is disabled: enable it to start encrypted runs",
            "KMSInvalidStateException": f"the KMS key {key} is pending deletion or unavailable",
            "NotFoundException": f"{key} names no KMS key in this account and region",
        }.get(code, "")
    else:
        key = f"the run's KMS key {key_id}" if key_id else "the KMS key the run was created under"
        hint = {
            "AccessDeniedException": f"this role needs kms:Decrypt on {key} (runs keep the key they were created "
                                     f"under, whatever AWSWORLD_KMS_KEY_ID says now)",
            "DisabledException": f"{key} is disabled: enable it to read or continue this run",
            "KMSInvalidStateException": f"{key} is pending deletion or unavailable: cancel its deletion "
                                        f"(aws kms cancel-key-deletion) to read or continue this run",
            "NotFoundException": f"{key} no longer exists: this run's values cannot be read",
            "InvalidCiphertextException": f"its wrapped data key does not open under {key} for this table and run "
                                          f"(the DATAKEY item was altered, or copied from another run or table)",
        }.get(code, "")
    return EncryptionKeyError(f"KMS could not {doing} run {run_id} ({code or error}){': ' + hint if hint else ''}",
                              lost=not doing.startswith("make") and code in LOST_KEY_CODES)
