-- When an MCP bearer token stops verifying (`contextctl token create NAME
-- --expires 30d`), in milliseconds since the epoch. NULL: never, which is
-- what every token made before this column existed is.
ALTER TABLE mcp_tokens ADD COLUMN expires_ms INTEGER;
