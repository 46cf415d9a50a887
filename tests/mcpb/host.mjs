// A host that installs contextd's MCP bundle as Claude Desktop does: it
// reads the unpacked bundle's manifest.json, turns its server.mcp_config
// into a command with the official MCPB library's getMcpConfigForManifest
// (the code that substitutes ${__dirname}, applies platform_overrides and
// user_config; npm @anthropic-ai/mcpb, pinned in scripts/deps.sh), and
// starts that command with the TypeScript SDK's stdio transport, which
// gives it only HOME LOGNAME PATH SHELL TERM USER (plus the manifest's env,
// none). Run by tests/it/mcpb.rs with only those six variables itself.
//
//   node host.mjs TOOLS_DIR BUNDLE_DIR CALLS_JSON
//
// TOOLS_DIR is the clone's .tools (the MCPB library and the SDK);
// BUNDLE_DIR the unpacked bundle; CALLS_JSON a list of tool names to call
// without arguments. It initializes, lists the tools, calls those, and
// prints one JSON report on stdout: the resolved config, the server's
// initialize result, the tools, the call results, what the server process
// is (/proc/PID/exe) and its environment's names, or the error that ended
// it. It does not judge; the test does.

import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { homedir } from "node:os";
import { pathToFileURL } from "node:url";

const [toolsDir, bundleDir, callsJson] = process.argv.slice(2);
const lib = (p) => import(pathToFileURL(join(toolsDir, p)).href);
const { getMcpConfigForManifest } = await lib(
    "mcpb/node_modules/@anthropic-ai/mcpb/dist/index.js",
);
const { Client } = await lib(
    "ts-sdk/node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js",
);
const { StdioClientTransport } = await lib(
    "ts-sdk/node_modules/@modelcontextprotocol/sdk/dist/esm/client/stdio.js",
);

const report = { config: null, server: null, tools: null, calls: {}, process: null, error: null };
const manifest = JSON.parse(readFileSync(join(bundleDir, "manifest.json"), "utf8"));
const home = homedir();
const config = await getMcpConfigForManifest({
    manifest,
    extensionPath: bundleDir,
    systemDirs: {
        HOME: home,
        DESKTOP: join(home, "Desktop"),
        DOCUMENTS: join(home, "Documents"),
        DOWNLOADS: join(home, "Downloads"),
    },
    userConfig: {},
    pathSeparator: "/",
});
report.config = config ?? null;

const transport = new StdioClientTransport({
    command: config.command,
    args: config.args ?? [],
    env: config.env,
    stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (d) => {
    stderr += d;
});
const client = new Client({ name: "claude-ai", version: "0.1.0" });
try {
    await client.connect(transport);
    report.server = {
        serverInfo: client.getServerVersion() ?? null,
        capabilities: client.getServerCapabilities() ?? null,
    };
    // What runs as the server: the launcher exec'd the installed
    // contextctl, so this pid is contextctl's, the child of this process.
    const pid = transport.pid;
    const environ = readFileSync(`/proc/${pid}/environ`, "latin1")
        .split("\0")
        .filter((kv) => kv.length > 0)
        .map((kv) => kv.split("=")[0]);
    report.process = { pid, exe: realpathSync(`/proc/${pid}/exe`), environ };
    report.tools = (await client.listTools()).tools;
    for (const name of JSON.parse(callsJson)) {
        report.calls[name] = await client.callTool({ name, arguments: {} });
    }
} catch (e) {
    report.error = String(e?.message ?? e);
} finally {
    await client.close().catch(() => {});
}
// The server's stderr arrives until it exits.
await new Promise((r) => setTimeout(r, 100));
report.stderr = stderr.slice(-4000);
process.stdout.write(JSON.stringify(report) + "\n");
