"""Drive contextd with the official Python MCP SDK (PyPI `mcp`), for the Rust
tests in tests/mcp_*.rs. It talks to the daemon like a real host would and
prints one JSON report of what it saw on stdout; the Rust test asserts.

    client.py --transport stdio --contextctl PATH ...
    client.py --transport http --url http://127.0.0.1:PORT/mcp --token T ...
    client.py --transport sse --url http://127.0.0.1:PORT/sse --token T ...

Scenarios:
    full     the host may see everything: list and call every tool, read
             every resource, the history template, prompts and completion,
             subscribe to
             context://windows/active and see `updated` after a focus change
             written to the replay FIFO
    denied   the host has no grant: tool errors, -32004, no `updated` leaks;
             then a grant is written and `list_changed` must arrive
    dump     read everything a host can read (every read tool, every
             resource listed or not, every template, every prompt, every
             completion) and report it all; tests/it/canaries.rs looks for
             planted markers in it; with --serve, one dump (and one
             report line) per line read from stdin, in one session, until
             stdin closes
    call     call one tool (--tool NAME, no arguments) and report it as
             `call` (tests/it/dashboard.rs: a read on the timeline, a prompt
             answered in the dashboard)
    provided app-provided context: context://provided/document, the tool
             get_provided_context, completion of {kind}, the vocabulary,
             what_am_i_doing; then subscribe (legacy) or listen (2026-07-28)
             to context://provided/document and write each of --changes to
             the replay FIFO, waiting for `updated` after each (10 s, or
             2 s with --no-updates, when none may come) and reading again
"""

import argparse
import asyncio
import json
import sys
import warnings

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")


def dump(model):
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


class Inbox:
    """Every notification the server sent, as JSON."""

    def __init__(self):
        self.items = []
        self.event = asyncio.Event()

    async def __call__(self, message):
        if isinstance(message, Exception):
            self.items.append({"exception": repr(message)})
        else:
            self.items.append(dump(message))
        self.event.set()

    def methods(self):
        return [m.get("method") for m in self.items if isinstance(m, dict)]

    async def wait_for(self, pred, timeout, start=0):
        """The first message from index `start` on that `pred` accepts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for m in self.items[start:]:
                if pred(m):
                    return m
            left = deadline - loop.time()
            if left <= 0:
                return None
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), left)
            except asyncio.TimeoutError:
                pass


def transport(args):
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    if args.transport == "stdio":
        env = json.loads(args.env) if args.env else None
        return StdioServerParameters(command=args.contextctl, args=["mcp"], env=env)
    if args.transport == "http":
        return streamable_http_client(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    if args.transport == "sse":
        return sse_client(args.url, headers=headers)
    raise SystemExit(f"unknown transport {args.transport}")


def error_of(e):
    if isinstance(e, MCPError):
        return {"code": e.code, "message": str(e.error.message), "data": e.error.data}
    return {"code": None, "message": repr(e)}


async def attempt(coro):
    try:
        return {"ok": dump(await coro)}
    except Exception as e:  # noqa: BLE001 - the report says what failed
        return {"error": error_of(e)}


async def focus_other(client, fifo):
    """Move the focus to whichever of w1 and w2 does not have it (through
    the replay FIFO the daemon reads), so that a change always happens."""
    active = None
    try:
        r = await client.read_resource("context://windows/active")
        active = (json.loads(r.contents[0].text).get("window") or {}).get("id")
    except Exception:  # noqa: BLE001 - a host without the grant cannot look
        pass
    target = "w1" if active == "w2" else "w2"
    with open(fifo, "w") as f:
        f.write(json.dumps({"type": "focus", "id": target}) + "\n")
    return target


async def full(client, args, inbox, report):
    legacy = args.mode == "legacy"
    report["tools"] = {}
    tools = await client.list_tools()
    report["tool_list"] = [dump(t) for t in tools.tools]
    for t in tools.tools:
        arguments = {}
        if t.name == "list_windows":
            arguments = {"limit": 1}
        if t.name == "send_notification":
            arguments = {"summary": "Hello from the test", "body": "body", "urgency": "low"}
        if t.name == "get_provided_context":
            arguments = {"kind": "document"}
        report["tools"][t.name] = await attempt(client.call_tool(t.name, arguments))
    # Pagination: the next page of list_windows.
    first = report["tools"].get("list_windows", {}).get("ok", {})
    cursor = (first.get("structuredContent") or {}).get("nextCursor")
    if cursor:
        report["list_windows_page2"] = await attempt(client.call_tool("list_windows", {"limit": 1, "cursor": cursor}))
    report["bad_args"] = await attempt(client.call_tool("list_windows", {"limit": 0, "bogus": 1}))
    report["unknown_tool"] = await attempt(client.call_tool("no_such_tool", {}))

    resources = await client.list_resources()
    report["resource_list"] = [str(r.uri) for r in resources.resources]
    report["resources"] = {}
    for r in resources.resources:
        report["resources"][str(r.uri)] = await attempt(client.read_resource(str(r.uri)))
    templates = await client.list_resource_templates()
    report["templates"] = [dump(t) for t in templates.resource_templates]
    # The timeline through its template, expanded as a host would: w1's
    # focus since the daemon started (the writer commits within a second).
    history = "context://history?app=org.gnome.TextEditor"
    for _ in range(50):
        report["history"] = await attempt(client.read_resource(history))
        contents = report["history"].get("ok", {}).get("contents") or [{}]
        if '"focus"' in contents[0].get("text", ""):
            break
        await asyncio.sleep(0.1)
    report["history_bad_date"] = await attempt(client.read_resource("context://history?since=yesterday"))
    report["complete_app"] = await attempt(
        client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="context://history{?since,until,app}"),
            {"name": "app", "value": "org.gnome"},
        )
    )
    report["window_w1"] = await attempt(client.read_resource("context://windows/w1"))
    report["window_gone"] = await attempt(client.read_resource("context://windows/nope"))
    report["no_such_resource"] = await attempt(client.read_resource("context://nothing"))

    prompts = await client.list_prompts()
    report["prompt_list"] = [p.name for p in prompts.prompts]
    report["prompt"] = await attempt(client.get_prompt("what_am_i_doing", {"detail": "brief"}))
    report["privacy"] = await attempt(client.get_prompt("privacy_report", {}))
    report["privacy_week"] = await attempt(client.get_prompt("privacy_report", {"period": "7d"}))
    report["complete"] = await attempt(
        client.complete(types.PromptReference(type="ref/prompt", name="what_am_i_doing"), {"name": "detail", "value": "b"})
    )
    report["complete_window"] = await attempt(
        client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="context://windows/{id}"),
            {"name": "id", "value": "w"},
        )
    )
    if legacy:
        report["ping"] = await attempt(client.send_ping())
        report["set_level"] = await attempt(client.set_logging_level("debug"))
        report["subscribe"] = await attempt(client.subscribe_resource("context://windows/active"))
        report["focused"] = await focus_other(client, args.fifo)
        got = await inbox.wait_for(
            lambda m: isinstance(m, dict)
            and m.get("method") == "notifications/resources/updated"
            and m["params"]["uri"] == "context://windows/active",
            10,
        )
        report["updated"] = got
        report["after_focus"] = await attempt(client.read_resource("context://windows/active"))
        report["unsubscribe"] = await attempt(client.unsubscribe_resource("context://windows/active"))
    else:
        async with client.listen(resource_subscriptions=["context://windows/active"]) as sub:
            report["honored"] = dump(sub.honored)
            report["focused"] = await focus_other(client, args.fifo)
            try:
                event = await asyncio.wait_for(sub.__anext__(), 10)
                report["updated"] = {"event": repr(event), "uri": str(getattr(event, "uri", ""))}
            except asyncio.TimeoutError:
                report["updated"] = None
        report["after_focus"] = await attempt(client.read_resource("context://windows/active"))


async def denied(client, args, inbox, report):
    legacy = args.mode == "legacy"
    report["tool"] = await attempt(client.call_tool("get_active_window", {}))
    report["read"] = await attempt(client.read_resource("context://windows/active"))
    report["history"] = await attempt(client.read_resource("context://history"))
    report["resource_list"] = [str(r.uri) for r in (await client.list_resources()).resources]
    report["snapshot"] = await attempt(client.read_resource("context://snapshot"))
    if legacy:
        report["subscribe_active"] = await attempt(client.subscribe_resource("context://windows/active"))
        report["subscribe_snapshot"] = await attempt(client.subscribe_resource("context://snapshot"))
        report["focused"] = await focus_other(client, args.fifo)
        await asyncio.sleep(1.5)
        report["leaked"] = [m for m in inbox.items if isinstance(m, dict) and m.get("method") == "notifications/resources/updated"]
        if args.grant:
            with open(args.policy + ".tmp", "w") as f:
                f.write(args.grant)
            import os

            os.rename(args.policy + ".tmp", args.policy)
            got = await inbox.wait_for(
                lambda m: isinstance(m, dict) and m.get("method") == "notifications/resources/list_changed", 10
            )
            report["list_changed"] = got
            report["resource_list_after"] = [str(r.uri) for r in (await client.list_resources()).resources]
            report["read_after"] = await attempt(client.read_resource("context://windows/active"))


async def dump_all(client, args, inbox, report):
    """Everything a host can read, whatever it may see: errors included."""
    since = "2000-01-01T00:00:00Z"
    out = report["read"] = {}
    tools = await client.list_tools()
    for t in tools.tools:
        if t.name == "send_notification":
            continue
        arguments = {}
        if t.name in ("list_windows", "list_notifications"):
            arguments = {"limit": 100}
        if t.name in ("get_recent_activity", "summarize_time"):
            arguments = {"since": since}
        if t.name == "get_provided_context":
            arguments = {"kind": "document"}
        out["tool " + t.name] = await attempt(client.call_tool(t.name, arguments))
    listed = await attempt(client.list_resources())
    out["resources/list"] = listed
    uris = {str(r["uri"]) for r in (listed.get("ok") or {}).get("resources", [])}
    uris |= {
        "context://snapshot", "context://windows", "context://windows/active",
        "context://media", "context://session", "context://power",
        "context://network", "context://notifications", "context://windows/w1",
        "context://windows/past", "context://history",
        "context://history?since=2000-01-01T00%3A00%3A00Z",
        "context://provided/document", "context://vocabulary",
        "context://documents/recent", "context://location", "context://selection",
        "context://calendar/events", "context://calendar/tasks",
    }
    for u in sorted(uris):
        out["resource " + u] = await attempt(client.read_resource(u))
    out["resources/templates/list"] = await attempt(client.list_resource_templates())
    prompts = await attempt(client.list_prompts())
    out["prompts/list"] = prompts
    for name, a in [
        ("what_am_i_doing", {"detail": "full"}),
        ("privacy_report", {"period": "24h"}),
        ("privacy_report", {"period": "7d"}),
        ("whats_next", {}),
    ]:
        out[f"prompt {name} {a}"] = await attempt(client.get_prompt(name, a))
    for ref, arg in [
        (types.ResourceTemplateReference(type="ref/resource", uri="context://windows/{id}"), "id"),
        (types.ResourceTemplateReference(type="ref/resource", uri="context://history{?since,until,app}"), "app"),
        (types.PromptReference(type="ref/prompt", name="what_am_i_doing"), "detail"),
        (types.PromptReference(type="ref/prompt", name="whats_next"), "about"),
        (types.ResourceTemplateReference(type="ref/resource", uri="context://provided/{kind}"), "kind"),
    ]:
        out[f"complete {arg}"] = await attempt(client.complete(ref, {"name": arg, "value": ""}))


async def provided(client, args, inbox, report):
    legacy = args.mode == "legacy"
    uri = "context://provided/document"
    report["resource_list"] = [str(r.uri) for r in (await client.list_resources()).resources]
    report["templates"] = [dump(t) for t in (await client.list_resource_templates()).resource_templates]
    report["tool_list"] = [dump(t) for t in (await client.list_tools()).tools]
    report["vocabulary"] = await attempt(client.read_resource("context://vocabulary"))
    report["read"] = await attempt(client.read_resource(uri))
    report["tool"] = await attempt(client.call_tool("get_provided_context", {"kind": "document"}))
    report["tool_bad_kind"] = await attempt(client.call_tool("get_provided_context", {"kind": "spreadsheet"}))
    report["tool_no_kind"] = await attempt(client.call_tool("get_provided_context", {}))
    report["read_bad_kind"] = await attempt(client.read_resource("context://provided/spreadsheet"))
    report["complete"] = await attempt(
        client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="context://provided/{kind}"),
            {"name": "kind", "value": ""},
        )
    )
    report["prompt"] = await attempt(client.get_prompt("what_am_i_doing", {"detail": "full"}))
    report["snapshot"] = await attempt(client.read_resource("context://snapshot"))
    changes = json.loads(args.changes or "[]")
    wait = 2 if args.no_updates else 10
    updates = report["updates"] = []
    reads = report["reads_after"] = []

    def write(line):
        with open(args.fifo, "w") as f:
            f.write(line + "\n")

    if legacy:
        report["subscribe"] = await attempt(client.subscribe_resource(uri))
        for line in changes:
            start = len(inbox.items)
            write(line)
            got = await inbox.wait_for(
                lambda m: isinstance(m, dict) and m.get("method") == "notifications/resources/updated", wait, start
            )
            updates.append(got and got["params"]["uri"])
            reads.append(await attempt(client.read_resource(uri)))
        report["unsubscribe"] = await attempt(client.unsubscribe_resource(uri))
    else:
        async with client.listen(resource_subscriptions=[uri]) as sub:
            report["honored"] = dump(sub.honored)
            for line in changes:
                write(line)
                try:
                    event = await asyncio.wait_for(sub.__anext__(), wait)
                    updates.append(str(getattr(event, "uri", repr(event))))
                except asyncio.TimeoutError:
                    updates.append(None)
                reads.append(await attempt(client.read_resource(uri)))


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", required=True)
    p.add_argument("--mode", default="legacy")
    p.add_argument("--scenario", default="full")
    p.add_argument("--contextctl")
    p.add_argument("--env")
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--fifo")
    p.add_argument("--policy")
    p.add_argument("--grant")
    p.add_argument("--changes")
    p.add_argument("--no-updates", action="store_true")
    p.add_argument("--tool")
    p.add_argument("--serve", action="store_true")
    args = p.parse_args()
    inbox = Inbox()
    report = {}
    async with Client(transport(args), mode=args.mode, message_handler=inbox, read_timeout_seconds=20) as client:
        info = client.session.initialize_result or client.session.discover_result
        report["server"] = dump(info)
        if args.scenario == "full":
            await full(client, args, inbox, report)
        elif args.scenario == "dump" and args.serve:
            # One host for many rounds: each line on stdin asks for a dump
            # of what the host may read now (the Python start and the
            # session's set-up are paid once).
            loop = asyncio.get_running_loop()
            while await loop.run_in_executor(None, sys.stdin.readline):
                await dump_all(client, args, inbox, report)
                sys.stdout.write(json.dumps({"read": report["read"]}) + "\n")
                sys.stdout.flush()
            return
        elif args.scenario == "dump":
            await dump_all(client, args, inbox, report)
        elif args.scenario == "call":
            report["call"] = await attempt(client.call_tool(args.tool, {}))
        elif args.scenario == "provided":
            await provided(client, args, inbox, report)
        else:
            await denied(client, args, inbox, report)
    report["notifications"] = inbox.methods()
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    asyncio.run(main())
