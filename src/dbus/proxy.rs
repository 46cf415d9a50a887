//! Client-side proxies, used by `contextctl`, the benchmarks and tests.

use std::collections::HashMap;

use zbus::proxy;
use zbus::wire::{OwnedObjectPath, OwnedVariant};

pub type Dict = HashMap<String, OwnedVariant>;

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
    fn subscribe(&self, categories: &[&str]) -> zbus::Result<OwnedObjectPath>;
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
