"""``awsworld dev --state``'s copies of the emulator (``cli/dev_state.Snapshots``): made when the emulator counted a
request that may have changed its table or bucket, skipped when nothing did, so an idle ``dev`` does not copy a
large table every few seconds and Ctrl-C does not wait for a copy of a table nothing touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awsworld.aws.world import AWSWorld
from awsworld.cli.dev_state import (
    KEEP_SECONDS,
    SNAPSHOT_SECONDS,
    SNAPSHOT_SHARE,
    TABLE_FILE,
    Snapshots,
    restore,
    snapshot,
)
from awsworld.local import MotoServer
from awsworld.local.provision import delete_table, provision_table


@pytest.fixture
def world(moto_world: AWSWorld) -> AWSWorld:
    return moto_world


def saved_keys(directory: Path) -> set[tuple[str, str]]:
    lines = (directory / TABLE_FILE).read_text(encoding="utf-8").splitlines()
    return {(item["pk"]["S"], item["sk"]["S"]) for item in map(json.loads, lines)}


async def test_a_copy_is_made_only_after_a_change(world: AWSWorld, moto_server: MotoServer, tmp_path: Path) -> None:
    table, bucket = world.config.table_name, world.config.bucket_name
    dynamodb, s3, sqs = await world.clients.dynamodb(), await world.clients.s3(), await world.clients.sqs()
    snapshots = Snapshots(world, tmp_path, lambda: moto_server.changes)
    assert await snapshots.save(), "the first look copies"
    await dynamodb.put_item(TableName=table, Item={"pk": {"S": "p#1"}, "sk": {"S": "a"}})
    assert await snapshots.save() and ("p#1", "a") in saved_keys(tmp_path)
    items = snapshots.items

    # Reads, a Scan, SQS traffic, an object read: none of them is a change, and nothing is copied.
    before = (tmp_path / TABLE_FILE).stat().st_mtime_ns
    await dynamodb.get_item(TableName=table, Key={"pk": {"S": "p#1"}, "sk": {"S": "a"}})
    await dynamodb.query(TableName=table, KeyConditionExpression="pk = :p", ExpressionAttributeValues={
        ":p": {"S": "p#1"}})
    await dynamodb.describe_table(TableName=table)
    await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody="{}")
    await s3.list_objects_v2(Bucket=bucket)
    assert not await snapshots.save()
    assert (tmp_path / TABLE_FILE).stat().st_mtime_ns == before and snapshots.items == items

    # Each kind of write is: an update, a transaction, a delete, an object written (saved under objects/).
    await dynamodb.update_item(TableName=table, Key={"pk": {"S": "p#1"}, "sk": {"S": "a"}},
                               UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "1"}})
    assert await snapshots.save()
    await dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": {
        "pk": {"S": "p#2"}, "sk": {"S": "b"}}}}])
    assert await snapshots.save() and ("p#2", "b") in saved_keys(tmp_path)
    await dynamodb.delete_item(TableName=table, Key={"pk": {"S": "p#2"}, "sk": {"S": "b"}})
    assert await snapshots.save() and ("p#2", "b") not in saved_keys(tmp_path)
    await s3.put_object(Bucket=bucket, Key="values/x", Body=b"kept")
    assert await snapshots.save()
    assert [p.read_bytes() for p in (tmp_path / "objects").iterdir()] == [b"kept"]
    assert not await snapshots.save()


async def test_a_slow_copy_spaces_the_next_one_out(world: AWSWorld, moto_server: MotoServer,
                                                  tmp_path: Path) -> None:
    """The wait between copies is ``SNAPSHOT_SECONDS``, or five times the last copy's time when that is longer, so
    copying takes at most a fifth of ``dev``'s time however large the table is (a clock that says each copy took
    3 s)."""
    ticks = iter([100.0, 103.0, 200.0, 200.5])
    snapshots = Snapshots(world, tmp_path, lambda: moto_server.changes, clock=lambda: next(ticks))
    assert snapshots.interval() == SNAPSHOT_SECONDS
    assert await snapshots.save()
    assert snapshots.interval() == pytest.approx(3.0 / SNAPSHOT_SHARE) == 15.0
    await (await world.clients.dynamodb()).put_item(TableName=world.config.table_name, Item={
        "pk": {"S": "p#1"}, "sk": {"S": "a"}})
    assert await snapshots.save()
    assert snapshots.interval() == SNAPSHOT_SECONDS


async def test_one_copy_slowed_by_a_busy_dev_does_not_widen_the_window_a_crash_loses(
        world: AWSWorld, moto_server: MotoServer, tmp_path: Path) -> None:
    """During a 1,000-step fan-out under ``dev``, one copy of 2,000 items waited 1.8 s for moto's lock and took
    3.9 s; the next then came 19.6 s later, and ``kill -9`` lost 16 s of step results (the docs: up to 5 s).
    Copying is judged by the quickest of the last three copies: one slow copy between quick ones leaves the
    interval at ``SNAPSHOT_SECONDS``, and only copies that are all slow space the next one out."""
    took = [0.5, 0.2, 3.9, 3.0, 4.0]
    ticks = iter(t for seconds in took for t in (100.0, 100.0 + seconds))
    snapshots = Snapshots(world, tmp_path, lambda: moto_server.changes, clock=lambda: next(ticks))
    dynamodb = await world.clients.dynamodb()
    intervals: list[float] = []
    for n in range(len(took)):
        await dynamodb.put_item(TableName=world.config.table_name, Item={"pk": {"S": f"p#{n}"}, "sk": {"S": "a"}})
        assert await snapshots.save()
        intervals.append(snapshots.interval())
    # before: 5, 5, 19.5 after the one slow copy; now 5 until three copies in a row are slow (the quickest 3 s)
    assert intervals == [SNAPSHOT_SECONDS] * 4 + [pytest.approx(3.0 / SNAPSHOT_SHARE)], intervals


async def test_a_resume_waits_for_one_copy_unless_copies_are_too_slow_to_wait_for(
        world: AWSWorld, moto_server: MotoServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``Snapshots.keep`` (a write that recorded a hook's payload, before its answer: ``tests/cli/
    test_dev_kept_resume.py`` kills ``dev`` after one) copies once for the resumes a copy under way already holds,
    and not at all while copies take longer than ``KEEP_SECONDS`` (10,000 waiting runs took 4 s a copy: every
    resume would wait that long), which it says once."""
    took = iter([100.0, 100.1] * 2 + [200.0, 200.0 + KEEP_SECONDS + 1] * 3)  # two quick copies, then three slow
    snapshots = Snapshots(world, tmp_path, lambda: moto_server.changes, clock=lambda: next(took))
    dynamodb = await world.clients.dynamodb()
    assert await snapshots.save()
    await dynamodb.put_item(TableName=world.config.table_name, Item={"pk": {"S": "p#1"}, "sk": {"S": "a"}})
    snapshots.keep()  # a quick copy: made, holding the write
    assert ("p#1", "a") in saved_keys(tmp_path)
    copied = (tmp_path / TABLE_FILE).stat().st_mtime_ns
    snapshots.keep()  # nothing since: no copy
    assert (tmp_path / TABLE_FILE).stat().st_mtime_ns == copied
    for n in range(2, 5):  # copies that all take longer than KEEP_SECONDS
        await dynamodb.put_item(TableName=world.config.table_name, Item={"pk": {"S": f"p#{n}"}, "sk": {"S": "a"}})
        assert await snapshots.save()
    await dynamodb.put_item(TableName=world.config.table_name, Item={"pk": {"S": "p#9"}, "sk": {"S": "a"}})
    with caplog.at_level("WARNING", logger="awsworld.dev"):
        snapshots.keep()
        snapshots.keep()
    assert ("p#9", "a") not in saved_keys(tmp_path), "not waited for"
    [said] = [r.getMessage() for r in caplog.records if "answered before a copy holds them" in r.getMessage()]
    assert "run it again with its --idempotency-key" in said, said


ALL_TYPES = {"d": {"S": "x" * 1500}, "n": {"N": "12.50"}, "b": {"B": b"\x00\x01\xff"}, "t": {"BOOL": True},
             "z": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]}, "bs": {"BS": [b"\x05"]},
             "m": {"M": {"a": {"L": [{"S": "x"}, {"B": b"\x02"}, {"N": "1"}]}, "bs": {"BS": [b"\x03", b"\x04"]}}}}


async def test_a_copy_read_in_the_process_saves_what_a_scan_saves(world: AWSWorld, moto_server: MotoServer,
                                                                   tmp_path: Path) -> None:
    """``dev`` reads moto's table in its own process (``MotoServer.read_table``): the file it saves is the one a
    Scan's answer saves, for every attribute type (binary ones too, nested), and it restores as that one does."""
    table = world.config.table_name
    dynamodb = await world.clients.dynamodb()
    for start in range(0, 60, 25):
        await dynamodb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": {"S": f"p#{i}"}, "sk": {"S": "x"}, **ALL_TYPES}}}
            for i in range(start, min(60, start + 25))]})
    await dynamodb.update_item(TableName=table, Key={"pk": {"S": "p#1"}, "sk": {"S": "x"}},
                               UpdateExpression="SET b2 = :b ADD ss :s", ExpressionAttributeValues={
                                   ":b": {"B": b"\x09"}, ":s": {"SS": ["c"]}})
    scanned, read = tmp_path / "scan", tmp_path / "read"
    scanned.mkdir(), read.mkdir()
    assert await snapshot(world, scanned) == 60
    assert await snapshot(world, read, moto_server.read_table) == 60

    def lines(directory: Path) -> list[str]:
        return sorted((directory / TABLE_FILE).read_text(encoding="utf-8").splitlines())

    assert lines(read) == lines(scanned)

    # Restored by BatchWriteItem, and in the process (MotoServer.put_items): the same table either way.
    for put_items in (None, moto_server.put_items):
        await delete_table(dynamodb, table)
        await provision_table(dynamodb, table)
        assert await restore(world, read, put_items) == 60
        item = (await dynamodb.get_item(TableName=table, Key={"pk": {"S": "p#1"}, "sk": {"S": "x"}}))["Item"]
        assert item["b2"] == {"B": b"\x09"} and item["m"] == ALL_TYPES["m"]
        assert sorted(item["ss"]["SS"]) == ["a", "b", "c"]
        again = tmp_path / f"again-{put_items is None}"
        again.mkdir()
        assert await snapshot(world, again, moto_server.read_table) == 60 and lines(again) == lines(scanned)
