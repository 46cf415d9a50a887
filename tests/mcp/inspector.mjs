// The MCP Inspector's CLI (`mcp-inspector --cli`, npm
// @modelcontextprotocol/inspector) as the host of `contextctl mcp`, once per
// method as a user or a script runs it: each run is a new Inspector process
// that spawns a new bridge with the Inspector SDK's default environment.
// Run by tests/it/mcp_inspector.rs through tests/mcp/minimal_env.sh, so this
// process and every Inspector get only HOME LOGNAME PATH SHELL TERM USER.
//
//   node inspector.mjs LAUNCHER CONTEXTCTL ARGUMENTS_JSON
//
// LAUNCHER is the package's bin (clients/launcher/build/index.js).
// ARGUMENTS_JSON is {"tools": {NAME: {...}}, "prompts": {NAME: {...}}}: the
// arguments of the tools and prompts that need some (the test knows them;
// this script only lists and calls).
//
// It lists the tools, calls every one, lists the resources and reads every
// one, lists the resource templates, lists the prompts and gets every one,
// and prints one JSON report on stdout: the environment the Inspector gave
// its stdio server (`environ`, seen through a `sh` that execs the bridge)
// and every run with its exit status, result and stderr. It does not judge;
// the test does. The calls after each list run three at a time (each is its
// own Inspector and bridge, as when a user runs several; one after the
// other they were the longest test of the suite).

import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [launcher, contextctl, argumentsJson] = process.argv.slice(2);
const given = JSON.parse(argumentsJson);
const runs = [];

// One Inspector run: `mcp-inspector --cli --format json METHOD... -- SERVER...`.
// With --format json the result is {"result": ...} on stdout; a failure is
// {"error": {"code", "message"}} on stderr, with a non-zero exit status (5
// for a tool result with isError, whose result is still on stdout).
function inspector(label, method, server = [contextctl, "mcp"]) {
    const started = Date.now();
    return new Promise((resolve) => {
        const child = spawn(
            process.execPath,
            [launcher, "--cli", "--format", "json", ...method, "--", ...server],
            { stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 },
        );
        let stdout = "";
        let stderr = "";
        child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
        child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
        let spawnError = null;
        child.on("error", (e) => (spawnError = e));
        child.on("close", (status, signal) => {
            const run = {
                label,
                argv: method,
                status,
                signal,
                ms: Date.now() - started,
                result: null,
                error: null,
                stderr: stderr.slice(-4000),
            };
            if (spawnError) run.error = { code: "spawn", message: String(spawnError) };
            try {
                run.result = JSON.parse(stdout).result ?? null;
            } catch {
                run.stdout = stdout.slice(0, 4000);
            }
            // The error envelope is the last JSON line of stderr (the
            // server's own stderr comes before it).
            for (const line of stderr.trim().split("\n").reverse()) {
                try {
                    const e = JSON.parse(line);
                    if (e && e.error) {
                        run.error = e.error;
                        break;
                    }
                } catch {
                    // not the envelope
                }
            }
            runs.push(run);
            resolve(run.result);
        });
    });
}

// Run `each` over `items`, `n` at a time.
async function pool(items, each, n = 3) {
    let next = 0;
    const worker = async () => {
        while (next < items.length) {
            await each(items[next++]);
        }
    };
    await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
}

// The first run finds no daemon: its bridge activates it on the bus.
await inspector("initialize", ["--method", "initialize"]);

// What the Inspector gives its stdio server: a shell that writes its own
// environment and execs the bridge (same process, same parent: the
// Inspector), so that this run is an ordinary one too.
const probeDir = mkdtempSync(join(tmpdir(), "inspector-env-"));
const probe = join(probeDir, "environ");
await inspector("environ", ["--method", "initialize"], [
    "/bin/sh",
    "-c",
    'cat /proc/$$/environ > "$0" && exec "$@"',
    probe,
    contextctl,
    "mcp",
]);
let environ = null;
try {
    environ = readFileSync(probe, "utf8").split("\0").filter(Boolean);
} catch {
    // the run's failure says why
}
rmSync(probeDir, { recursive: true, force: true });

const tools = (await inspector("tools/list", ["--method", "tools/list"]))?.tools ?? [];
await pool(tools, (t) =>
    inspector(`tools/call ${t.name}`, [
        "--method",
        "tools/call",
        "--tool-name",
        t.name,
        "--tool-args-json",
        JSON.stringify(given.tools?.[t.name] ?? {}),
    ]),
);

const resources =
    (await inspector("resources/list", ["--method", "resources/list"]))?.resources ?? [];
await pool(resources, (r) =>
    inspector(`resources/read ${r.uri}`, ["--method", "resources/read", "--uri", r.uri]),
);

await inspector("resources/templates/list", ["--method", "resources/templates/list"]);

const prompts = (await inspector("prompts/list", ["--method", "prompts/list"]))?.prompts ?? [];
await pool(prompts, (p) => {
    const pairs = Object.entries(given.prompts?.[p.name] ?? {}).map(([k, v]) => `${k}=${v}`);
    return inspector(`prompts/get ${p.name}`, [
        "--method",
        "prompts/get",
        "--prompt-name",
        p.name,
        ...(pairs.length ? ["--prompt-args", ...pairs] : []),
    ]);
});

process.stdout.write(JSON.stringify({ environ, runs }) + "\n");
