"""Call every tool contextd lists and read every resource that has a tool's
shape, over stdio with the official Python MCP SDK, and validate each
result's JSON against the tool's outputSchema with `jsonschema`
(Draft 2020-12, the dialect MCP tool schemas default to). Prints one JSON
report for tests/it/schemas_outputs.rs:

    {"tools": {NAME: {"errors": [...], "keys": [...]}},
     "resources": {URI: {"tool": NAME, "errors": [...], "keys": [...]}},
     "schemas": {NAME: [schema problems]}}

    validate_outputs.py --contextctl PATH --env JSON
"""

import argparse
import asyncio
import json
import sys
import warnings

from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

warnings.simplefilter("ignore")

SINCE = "2000-01-01T00:00:00Z"

ARGUMENTS = {
    "list_windows": {"limit": 1},
    "list_notifications": {"limit": 100},
    "get_recent_activity": {"since": SINCE},
    "summarize_time": {"since": SINCE},
    "get_provided_context": {"kind": "document"},
    "send_notification": {"summary": "Hello from the test", "body": "body", "urgency": "low"},
}

# Resources whose JSON is what a tool returns.
RESOURCES = {
    "context://snapshot": "get_snapshot",
    "context://windows": "list_windows",
    "context://windows/active": "get_active_window",
    "context://windows/w1": "get_active_window",
    "context://media": "get_media_activity",
    "context://session": "get_session_state",
    "context://power": "get_power",
    "context://network": "get_network",
    "context://notifications": "list_notifications",
    "context://documents/recent": "list_recent_documents",
    "context://location": "get_location",
    "context://selection": "get_selection",
    "context://calendar/events": "get_upcoming_events",
    "context://calendar/tasks": "list_tasks",
    "context://provided/document": "get_provided_context",
    "context://history?since=2000-01-01T00%3A00%3A00Z": "get_recent_activity",
}


def errors_of(validator, value):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(value)]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--contextctl", required=True)
    p.add_argument("--env", required=True)
    args = p.parse_args()
    params = StdioServerParameters(command=args.contextctl, args=["mcp"], env=json.loads(args.env))
    report = {"tools": {}, "resources": {}, "schemas": {}}
    async with Client(params, mode="legacy", read_timeout_seconds=20) as client:
        # Tools with an output schema: all of contextd's (the conformance
        # build's fixture tools have none and are not called here).
        tools = [t for t in (await client.list_tools()).tools if t.output_schema is not None]
        validators = {}
        for t in tools:
            schema = t.output_schema
            problems = []
            try:
                Draft202012Validator.check_schema(schema)
                Draft202012Validator.check_schema(t.input_schema)
            except Exception as e:  # noqa: BLE001 - the report says what
                problems.append(str(e))
            if not isinstance(schema, dict) or schema.get("type") != "object":
                problems.append("the output schema is no object schema")
            report["schemas"][t.name] = problems
            validators[t.name] = Draft202012Validator(schema)
        for t in tools:
            entry = report["tools"][t.name] = {}
            try:
                r = await client.call_tool(t.name, ARGUMENTS.get(t.name, {}))
            except Exception as e:  # noqa: BLE001 - the SDK validates too
                entry["errors"] = [f"call failed: {e!r}"]
                continue
            if r.is_error:
                entry["errors"] = [f"tool error: {r.content[0].text if r.content else ''}"]
                continue
            sc = r.structured_content
            entry["keys"] = sorted(sc) if isinstance(sc, dict) else []
            entry["errors"] = errors_of(validators[t.name], sc)
        for uri, tool in RESOURCES.items():
            entry = report["resources"][uri] = {"tool": tool}
            try:
                r = await client.read_resource(uri)
                value = json.loads(r.contents[0].text)
            except Exception as e:  # noqa: BLE001 - the report says what
                entry["errors"] = [f"read failed: {e!r}"]
                continue
            entry["keys"] = sorted(value) if isinstance(value, dict) else []
            entry["errors"] = errors_of(validators[tool], value)
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    asyncio.run(main())
