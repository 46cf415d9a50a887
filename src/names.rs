//! The broker's names on the bus, shared by the daemon, its publishers and
//! its clients (`contextctl`, the stdio bridge), so that no client has to
//! import a publisher to find the broker.

/// The well-known name the broker owns on the session bus.
pub const BUS_NAME: &str = "org.contextd.Broker1";
/// The object every `org.contextd.*` interface is served at.
pub const PATH: &str = "/org/contextd/Broker1";

/// The MCP socket `contextctl mcp` relays to, in `$XDG_RUNTIME_DIR/contextd/`.
pub const MCP_SOCKET: &str = "mcp.sock";
/// The token management socket (`contextctl token …`), beside it.
pub const ADMIN_SOCKET: &str = "admin.sock";
