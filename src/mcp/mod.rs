//! The MCP publisher (stdio socket, Streamable HTTP, legacy SSE). Filled in
//! by the MCP issue; it will render through `core::view` and ask the same
//! gate as D-Bus.
