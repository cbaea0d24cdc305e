"""``awsworld limits ...``: limits across runs while they run (``client.limits``), for operators and scripts.

    awsworld limits                                   # every limit: its busy keys, holders, waiters, tokens
    awsworld limits --all                             # and its idle keys (kept 30 days after their last use)
    awsworld limits describe workflow:shop.order --key cust-7   # holders, and waiters in the order they start
    awsworld limits set workflow:shop.order --key cust-7 --concurrency 3   # now, until reset (waiters start)
    awsworld limits set step:shop.charge --rate 20/s --burst 5
    awsworld limits set workflow:shop.sync --total 10           # a limit's total across its keys
    awsworld limits pause step:shop.export            # no new slot or token (unkeyed: no --key)
    awsworld limits resume step:shop.export
    awsworld limits reset workflow:shop.order --key cust-7      # code's numbers again; crashed holders freed
    awsworld limits reset workflow:shop.sync --total            # the code's total again

A limit is named ``workflow:<workflow>``, ``step:<step>``, or by the ``name=`` its code gave it. A key nothing has
used yet can be set when the command runs with the code that declares the limit (``AWSWORLD_MODULES``).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from .output import print_json, print_table, remote

if TYPE_CHECKING:
    from ..client.limits import LimitView


def register(sub: Any) -> None:
    group = sub.add_parser("limits", help="limits across runs: list, describe, set, pause, resume, reset",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    group.add_argument("--all", action="store_true", help=ALL_HELP)
    group.set_defaults(handler=_list)
    commands = group.add_subparsers(dest="limits_command", metavar="SUBCOMMAND")
    read = argparse.ArgumentParser(add_help=False)
    read.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    keyed = argparse.ArgumentParser(add_help=False)
    keyed.add_argument("limit", metavar="LIMIT", help="workflow:<name>, step:<name>, or the limit's name=")
    keyed.add_argument("--key", default="", help="the key (default: the unkeyed limit's one key)")

    listing = commands.add_parser("list", parents=[read], help="every limit with its keys (the default)")
    listing.add_argument("--all", action="store_true", help=ALL_HELP)
    listing.set_defaults(handler=_list)
    describe = commands.add_parser("describe", parents=[read], help="holders, waiters in order, tokens")
    describe.add_argument("limit", metavar="LIMIT")
    describe.add_argument("--key", help="that key only")
    describe.set_defaults(handler=_describe)
    setting = commands.add_parser("set", parents=[read, keyed], help="override a key's concurrency or rate, or "
                                  "the total, now and until reset")
    setting.add_argument("--concurrency", type=int, help="holders of the key at once")
    setting.add_argument("--total", type=int, help="holders across all keys at once (a limit with a total)")
    setting.add_argument("--rate", help="starts per period: 50/s, 10/m, 5/10s")
    setting.add_argument("--burst", type=int, help="with --rate: starts at once (default: one period's worth)")
    setting.set_defaults(handler=_set)
    for change, text in (("pause", "no new slot or token for the key until resume"),
                         ("resume", "grant again (waiters that fit start now)"),
                         ("reset", "drop the key's overrides and pause; free slots of holders that ended")):
        command = commands.add_parser(change, parents=[read, keyed], help=text)
        command.set_defaults(handler=_changer(change))
        if change == "reset":  # (a total shut with `set --total 0` is reset here, as a key's numbers are)
            command.add_argument("--total", action="store_true",
                                 help="the limit's total set at run time instead of a key's numbers")


ALL_HELP = ("list idle keys too (nothing holds, waits, is paused or set there, a token to give); without it "
            "they are counted, not listed")


def limit_json(view: LimitView) -> dict[str, Any]:
    """A limit for scripts (stable camelCase keys)."""
    from ..client.limits import holder_parts

    spec = view.spec
    return {
        "limit": view.name, "concurrency": spec.concurrency, "total": view.total, "codeHere": view.declared,
        "rate": spec.rate.text() if spec.rate else None,
        "keys": [{
            "key": k.key, "concurrency": k.concurrency, "paused": k.paused, "overridden": k.overridden,
            "rate": k.rate.text() if k.rate else None,
            "tokens": None if k.tokens is None else round(k.tokens, 3),
            "nextStart": k.next_start.isoformat() if k.next_start is not None else None,
            # runId and stepId: the run (a step attempt's too) and step a stored holder id names (stepId None for a
            # run's own slot); a step's runId read null
            "holders": [{"holder": h, "runId": holder_parts(h)[0], "stepId": holder_parts(h)[1],
                         "since": v.since.isoformat(),
                         "leaseUntil": v.lease_until.isoformat() if v.lease_until else None} for h, v in k.holders],
            "waiters": [{"place": i + 1, "holder": w.holder, "runId": holder_parts(w.holder)[0],
                         "stepId": holder_parts(w.holder)[1], "priority": w.priority,
                         "since": w.since.isoformat()} for i, w in enumerate(k.waiters)],
        } for k in view.keys],
        "idleKeysHidden": view.hidden,
    }


HEADER = ("LIMIT", "KEY", "HELD", "WAITING", "TOKENS", "STATE")


def _rows(document: dict[str, Any]) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    # A limit with a total: a key's own "-" would read as "no limit", so the total's use goes beside it.
    in_all = "" if document["total"] is None else \
        f" ({sum(len(k['holders']) for k in document['keys'])}/{document['total']} in all)"
    for k in document["keys"] or [None]:
        if k is None:  # (every key idle, and not listed: how many)
            hidden = document["idleKeysHidden"]
            rows.append((document["limit"], "-", "0", "0", "-",
                         f"idle ({hidden} key{'s' if hidden != 1 else ''})" if hidden else "idle"))
            continue
        limit = k["concurrency"] if k["concurrency"] is not None else "-"
        tokens = "-" if k["tokens"] is None else f"{k['tokens']:g} ({k['rate']})"
        state = ("paused" if k["paused"] else "closed" if _closed(document, k) else "open") \
            + (", overridden" if k["overridden"] else "")
        rows.append((document["limit"], k["key"] or '""', f"{len(k['holders'])}/{limit}{in_all}",
                     str(len(k["waiters"])), tokens, state))
    return rows


def _closed(document: dict[str, Any], key: dict[str, Any]) -> bool:
    """A key whose concurrency (or whose limit's total) is 0: as shut as a paused one, though not paused, so the
    list says so rather than `open` (a 0 set meaning "no limit" read as open, and every run waited)."""
    return key["concurrency"] == 0 or document["total"] == 0


def _who(entry: dict[str, Any]) -> str:
    """A holder or waiter of ``limit_json``'s by the ids ``awsworld describe`` takes: a run's id, or ``step step_3
    of run wrun_…`` as describe names a step holder (the stored ``s:wrun_…:step_3`` was printed)."""
    from ..client.limits import holder_text

    return entry["runId"] if entry["runId"] and entry["stepId"] is None else holder_text(entry["holder"])


def _print_limit(document: dict[str, Any], asked: str | None = None) -> None:
    """One limit, a line per key; ``asked``, the ``--key`` the command named, has its line even when nothing has
    used that key yet (``limits describe LIMIT --key K`` printed the limit's header alone, not naming K)."""
    from .._timeline import deadline_text

    total = f", total {document['total']}" if document["total"] is not None else ""
    rate = f", rate {document['rate']}" if document["rate"] else ""
    concurrency = f"concurrency {document['concurrency']}" if document["concurrency"] is not None else "no concurrency"
    print(f"{document['limit']}  {concurrency}{total}{rate}")  # a rate-only limit has no concurrency: not "None"
    for k in document["keys"]:
        # A key's numbers set at run time read as such beside the code's (the header's): "3 held of 3" under
        # "concurrency 1", or a rate set to 50/s under "rate 2/m", once read as a change that did not take.
        code = document["concurrency"]
        held = f"{len(k['holders'])} held" + (f" of {k['concurrency']}" if k["concurrency"] is not None else "")
        # A key the code here has not used yet keeps the numbers of the code that used it last (a deploy raised
        # the limit: "1 held of 1" under "concurrency 2" read as a change that did not take).
        last = ("recorded by the code that used it last; this code's {} from its next use" if document["codeHere"]
                else "recorded by the code that used it last")
        if k["overridden"] and k["concurrency"] != code:
            held += f" (set at run time; the code's {'none' if code is None else code})"
        elif k["concurrency"] != code and k["concurrency"] is not None:
            held += f" ({last.format('none' if code is None else code)})"
        rate = f", rate {k['rate']} (set at run time; the code's {document['rate'] or 'none'})" \
            if k["overridden"] and k["rate"] != document["rate"] else \
            f", rate {k['rate']} ({last.format(document['rate'] or 'none')})" \
            if k["rate"] != document["rate"] and k["rate"] is not None else ""
        print(f"  key {k['key']!r}: {held}, {len(k['waiters'])} waiting" + (", paused" if k["paused"] else "")
              + (", closed: nothing starts until a `limits set` raises it or `limits reset`"
                 if _closed(document, k) and not k["paused"] else "")
              + rate + (f", {k['tokens']:g} token(s)" if k["tokens"] is not None else "")
              # (no token: starts reserved ahead, which no waiter count shows; the next free one says how far)
              + (f", the next free start {deadline_text(k['nextStart'])}" if k["tokens"] is not None
                 and k["tokens"] < 1 and k["nextStart"] else ""))
        for h in k["holders"]:
            print(f"    holds  {_who(h)}  since {deadline_text(h['since'])}"
                  + (f", lease until {deadline_text(h['leaseUntil'])}" if h["leaseUntil"] else ""))
        for w in k["waiters"]:
            print(f"    {w['place']:>4}.  {_who(w)}  priority {w['priority']}, "
                  f"since {deadline_text(w['since'])}")
    if asked is not None and all(k["key"] != asked for k in document["keys"]):
        of = f" of {document['concurrency']}" if document["concurrency"] is not None else ""
        print(f"  key {asked!r}: nothing has used it yet (0 held{of}, 0 waiting)")


def _run(args: argparse.Namespace, work: Any) -> int:
    async def go() -> Any:
        async with remote() as client:
            return await work(client.limits)

    document = asyncio.run(go())
    if args.json:
        print_json(document)
    elif isinstance(document, list):
        if document:
            print_table(HEADER, [row for item in document for row in _rows(item)])
            hidden = sum(item["idleKeysHidden"] for item in document)
            if hidden:
                print(f"{hidden} idle key{'s' if hidden != 1 else ''} not listed (nothing holds, waits, is paused "
                      "or set there): `awsworld limits --all` lists them, `awsworld limits describe LIMIT` one "
                      "limit's")
        else:
            print("no limits (nothing has used one yet)")
    else:  # (a change of the total names no key: `set --total` once printed "key '': nothing has used it yet")
        total = getattr(args, "total", None)
        _print_limit(document, None if total is True or type(total) is int else getattr(args, "key", None))
    return 0


def _list(args: argparse.Namespace) -> int:
    async def work(limits: Any) -> Any:
        # Idle keys only counted unless --all: a pool is kept 30 days after its last use, so per-customer keys
        # listed every customer of the month.
        return [limit_json(view) for view in await limits.list(idle=args.all)]

    return _run(args, work)


def _describe(args: argparse.Namespace) -> int:
    async def work(limits: Any) -> Any:
        return limit_json(await limits.describe(args.limit, key=args.key))

    return _run(args, work)


def _set(args: argparse.Namespace) -> int:
    async def work(limits: Any) -> Any:
        return limit_json(await limits.set(args.limit, key=args.key, concurrency=args.concurrency, total=args.total,
                                           rate=args.rate, burst=args.burst))

    return _run(args, work)


def _changer(change: str) -> Any:
    def handle(args: argparse.Namespace) -> int:
        async def work(limits: Any) -> Any:
            if getattr(args, "total", False):  # (reset --total)
                return limit_json(await limits.reset(args.limit, key=args.key, total=True))
            return limit_json(await getattr(limits, change)(args.limit, key=args.key))

        return _run(args, work)

    return handle
