"""The smallest MCP host: a script that starts `contextctl mcp` as its stdio
server, as Claude Code or any SDK host does, calls `get_active_window`, and
prints one JSON line: this script's path and the answer (or error).

Run by tests/it/mcp_minimal_env.rs as two copies under different names, each by
the system's python3: the broker must tell the two apart (issue 28, hole 10).
Standard library only, so that it runs with any python3.

    script_host.py CONTEXTCTL
"""

import json
import subprocess
import sys


def main():
    ctl = sys.argv[1]
    server = subprocess.Popen(
        [ctl, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )

    def send(message):
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()

    def answer(request_id):
        while True:
            line = server.stdout.readline()
            if not line:
                return {"closed": True}
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "script host", "version": "1"},
            },
        }
    )
    initialized = answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_active_window", "arguments": {}},
        }
    )
    called = answer(2)
    server.stdin.close()
    server.wait(timeout=30)
    print(
        json.dumps(
            {"script": __file__, "initialize": initialized, "call": called}
        ),
        flush=True,
    )


main()
