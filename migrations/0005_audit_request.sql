-- What the app called when the gate decided (the D-Bus member, or the MCP
-- method and its tool, resource or prompt), so the audit says why an app
-- read, not only what. Rows written before have ''.
ALTER TABLE audit ADD COLUMN request TEXT NOT NULL DEFAULT '';
