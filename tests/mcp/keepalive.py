"""Refusals on a kept-alive connection, as the MCP SDK's HTTP client sees
them (tests/it/http_keepalive.rs).

    keepalive.py URL TOKEN ROUNDS

Each round opens one `httpx2.AsyncClient` (the client PyPI `mcp` uses; one
connection at most) and sends, in turn: a POST without a token (401), a POST
with the token and a foreign Origin (403), and a 2 MiB POST with the token
(413). Prints one JSON report: per round, each status (or the exception's
name) and the client port each answer came on.
"""

import asyncio
import json
import sys

import httpx2

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "keepalive", "version": "1"},
        },
    }
)


def big_body() -> bytes:
    # Valid JSON-RPC, 2 MiB: only its size is wrong.
    pad = "x" * (2 * 1024 * 1024)
    return json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": {"pad": pad}}}
    ).encode()


async def one_round(url: str, token: str, big: bytes) -> list:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
    steps = [
        ("401", dict(headers), INIT.encode()),
        (
            "403",
            dict(headers, Authorization=f"Bearer {token}", Origin="https://evil.example"),
            INIT.encode(),
        ),
        ("413", dict(headers, Authorization=f"Bearer {token}"), big),
    ]
    out = []
    ports = []

    async def port_of(r: httpx2.Response) -> None:
        # Asked as the head arrives: after a `Connection: close` answer
        # the client closes the socket once the body is read.
        stream = r.extensions.get("network_stream")
        addr = stream.get_extra_info("client_addr") if stream is not None else None
        ports.append(addr[1] if addr else None)

    hooks = {"response": [port_of]}
    async with httpx2.AsyncClient(limits=limits, timeout=20, event_hooks=hooks) as client:
        for want, h, body in steps:
            try:
                r = await client.post(url, headers=h, content=body)
                out.append({"want": want, "status": r.status_code, "port": ports[-1]})
            except Exception as e:  # the failure is what the report shows
                out.append({"want": want, "error": type(e).__name__, "detail": str(e)})
    return out


async def main() -> None:
    url, token, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    big = big_body()
    report = []
    for _ in range(rounds):
        report.append(await one_round(url, token, big))
    print(json.dumps(report))


asyncio.run(main())
