//! Client-side proxies, used by `contextctl`, the benchmarks and tests.

use std::collections::HashMap;

use zbus::proxy;
use zbus::wire::{OwnedObjectPath, OwnedVariant};

pub type Dict = HashMap<String, OwnedVariant>;

/// One record of a `GetProvidedPage` answer, read into its fields
/// ([`super::page`]): no map and no owned variant per field. Keys the
/// broker may add later are skipped.
#[derive(Debug, Clone, PartialEq, Eq, zbus::DeserializeDict, zbus::Type)]
#[zbus(signature = "a{sv}")]
pub struct PageRecord {
    /// The publishing app, as the broker identified it.
    pub app_id: String,
    pub kind: String,
    /// When the app last published it (RFC 3339).
    pub updated: String,
    /// The entry, as its JSON-LD text.
    pub json: String,
}

#[proxy(
    interface = "org.contextd.Context1",
    default_service = "org.contextd.Broker1",
    default_path = "/org/contextd/Broker1"
)]
pub trait Context1 {
    fn get_snapshot(&self) -> zbus::Result<Dict>;
    fn list_windows(&self) -> zbus::Result<Vec<Dict>>;
    fn get_active_window(&self) -> zbus::Result<Dict>;
    fn get_media(&self) -> zbus::Result<Dict>;
    fn list_sources(&self) -> zbus::Result<Vec<Dict>>;
    fn list_categories(&self) -> zbus::Result<Vec<Dict>>;
    fn get_provided(&self, kind: &str) -> zbus::Result<Vec<Dict>>;
    fn get_provided_page(
        &self,
        kind: &str,
        limit: u32,
        cursor: &str,
    ) -> zbus::Result<(Vec<Dict>, String)>;
    fn list_recent_documents(&self) -> zbus::Result<Vec<Dict>>;
    fn get_location(&self) -> zbus::Result<Dict>;
    fn get_calendar(&self) -> zbus::Result<Dict>;
    fn get_selection(&self) -> zbus::Result<Dict>;
    fn subscribe(&self, categories: &[&str]) -> zbus::Result<OwnedObjectPath>;
    fn request_access(&self, categories: &[&str], reason: &str) -> zbus::Result<OwnedObjectPath>;
    #[zbus(property)]
    fn version(&self) -> zbus::Result<u32>;
}

#[proxy(
    interface = "org.contextd.Subscription1",
    default_service = "org.contextd.Broker1"
)]
pub trait Subscription1 {
    fn unsubscribe(&self) -> zbus::Result<()>;
    #[zbus(property)]
    fn categories(&self) -> zbus::Result<Vec<String>>;
    #[zbus(signal)]
    fn changed(&self, category: String, data: Dict) -> zbus::Result<()>;
    #[zbus(signal)]
    fn revoked(&self, category: String, reason: String) -> zbus::Result<()>;
}

/// Consent1 in a module of its own: its `Changed` signal would clash with
/// Subscription1's generated types.
pub mod consent {
    use super::Dict;
    use zbus::proxy;

    #[proxy(
        interface = "org.contextd.Consent1",
        default_service = "org.contextd.Broker1",
        default_path = "/org/contextd/Broker1"
    )]
    pub trait Consent1 {
        fn list_apps(&self) -> zbus::Result<Vec<Dict>>;
        fn list_grants(&self) -> zbus::Result<Vec<Dict>>;
        fn set_grant(
            &self,
            app: &str,
            category: &str,
            decision: &str,
            expires: i64,
        ) -> zbus::Result<()>;
        fn revoke(&self, app: &str, category: &str) -> zbus::Result<bool>;
        fn forget_app(&self, app: &str) -> zbus::Result<u64>;
        fn list_providers(&self) -> zbus::Result<Vec<Dict>>;
        fn set_publishing(&self, app: &str, allowed: bool) -> zbus::Result<bool>;
        fn get_audit(
            &self,
            since: i64,
            until: i64,
            app: &str,
            limit: u32,
        ) -> zbus::Result<Vec<Dict>>;
        fn register_agent(&self, agent: &zbus::wire::ObjectPath<'_>) -> zbus::Result<()>;
        fn unregister_agent(&self, agent: &zbus::wire::ObjectPath<'_>) -> zbus::Result<()>;
        fn set_paused(&self, paused: bool) -> zbus::Result<()>;
        fn dismiss_recovery(&self) -> zbus::Result<bool>;
        fn rotate_key(&self) -> zbus::Result<String>;
        fn export(&self, history: bool) -> zbus::Result<String>;
        fn import(&self, data: &str) -> zbus::Result<Dict>;
        fn list_pending(&self) -> zbus::Result<Vec<Dict>>;
        fn answer_pending(&self, id: u64, answer: &str, duration_s: u32) -> zbus::Result<bool>;
        fn list_readers(&self) -> zbus::Result<Vec<Dict>>;
        fn end_reader(&self, id: u64) -> zbus::Result<bool>;
        fn open_dashboard(&self) -> zbus::Result<String>;
        fn watch_changes(&self) -> zbus::Result<()>;
        // Read each time: the broker sends no PropertiesChanged for it.
        #[zbus(property(emits_changed_signal = "false"))]
        fn paused(&self) -> zbus::Result<bool>;
        #[zbus(property(emits_changed_signal = "false"))]
        fn recovery(&self) -> zbus::Result<String>;
        #[zbus(signal)]
        fn changed(&self, parts: Vec<String>) -> zbus::Result<()>;
    }
}

pub use consent::Consent1Proxy;

#[proxy(
    interface = "org.contextd.Provider1",
    default_service = "org.contextd.Broker1",
    default_path = "/org/contextd/Broker1"
)]
pub trait Provider1 {
    fn publish(&self, kind: &str, data: &str) -> zbus::Result<()>;
    fn retract(&self, kind: &str) -> zbus::Result<()>;
    #[zbus(property)]
    fn vocabulary(&self) -> zbus::Result<String>;
}

#[proxy(
    interface = "org.contextd.Request1",
    default_service = "org.contextd.Broker1"
)]
pub trait Request1 {
    fn close(&self) -> zbus::Result<()>;
    #[zbus(signal)]
    fn response(&self, response: u32, results: Dict) -> zbus::Result<()>;
}

#[proxy(
    interface = "org.contextd.History1",
    default_service = "org.contextd.Broker1",
    default_path = "/org/contextd/Broker1"
)]
pub trait History1 {
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        since: i64,
        until: i64,
        categories: &[&str],
        apps: &[&str],
        limit: u32,
        cursor: &str,
    ) -> zbus::Result<(Vec<Dict>, String)>;
    fn summary(&self, since: i64, until: i64) -> zbus::Result<Vec<Dict>>;
    fn forget(
        &self,
        since: i64,
        until: i64,
        apps: &[&str],
        categories: &[&str],
    ) -> zbus::Result<u64>;
    // Read each time: the broker sends no PropertiesChanged for it.
    #[zbus(property(emits_changed_signal = "false"))]
    fn recording(&self) -> zbus::Result<bool>;
}
