// The anchor of `benches/mcp.rs`: the same trivial tool as contextd's
// `get_active_window`, served by the official TypeScript MCP SDK
// (@modelcontextprotocol/sdk, repo-local under .tools/ts-sdk) over
// Streamable HTTP with sessions, on Node's own http server.
//
//   node benches/mcp_ts_anchor.cjs .tools/ts-sdk
//
// Prints the port it listens on (127.0.0.1), then serves until killed.

const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { createRequire } = require('node:module');

const sdk = createRequire(process.argv[2] + '/node_modules/');
const { McpServer } = sdk('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = sdk('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { isInitializeRequest } = sdk('@modelcontextprotocol/sdk/types.js');

const WINDOW = {
  id: 'w1',
  app_id: 'org.gnome.TextEditor',
  title: 'notes.txt',
  states: ['activated'],
  focused: true,
};

function server() {
  const s = new McpServer({ name: 'ts-anchor', version: '1.0.0' });
  s.registerTool(
    'get_active_window',
    { description: 'The focused window (a constant)' },
    async () => ({
      content: [{ type: 'text', text: `# Focused window\n\n${WINDOW.app_id} — ${WINDOW.title}` }],
      structuredContent: { window: WINDOW },
    }),
  );
  return s;
}

const transports = {};

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', reject);
  });
}

const httpServer = http.createServer(async (req, res) => {
  try {
    const sid = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    let t = sid ? transports[sid] : undefined;
    if (!t && req.method === 'POST' && isInitializeRequest(body)) {
      t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports[id] = t;
        },
      });
      t.onclose = () => {
        if (t.sessionId) delete transports[t.sessionId];
      };
      await server().connect(t);
    }
    if (!t) {
      res.writeHead(400).end('no session');
      return;
    }
    await t.handleRequest(req, res, body);
  } catch (e) {
    if (!res.headersSent) res.writeHead(500).end(String(e));
  }
});

httpServer.keepAliveTimeout = 60000;
httpServer.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${httpServer.address().port}\n`);
});
