-- Bearer tokens for MCP over HTTP: per name, only an HMAC-SHA256 of the
-- token (under the key below), so that the token cannot be read back out.
CREATE TABLE mcp_tokens (
    name        TEXT PRIMARY KEY NOT NULL,
    hmac_sha256 BLOB NOT NULL,
    created_ms  INTEGER NOT NULL
) STRICT;

-- The HMAC key: one row, made at the first start (or imported from the
-- mcp-token.key file of earlier versions).
CREATE TABLE mcp_token_key (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    key BLOB NOT NULL
) STRICT;
