//! The privacy indicator on desktops with a system tray (KDE Plasma,
//! waybar, GNOME with the AppIndicator extension): a
//! `org.kde.StatusNotifierItem` with a `com.canonical.dbusmenu` menu that
//! the broker registers with the `org.kde.StatusNotifierWatcher` while an
//! app or AI host reads (`Indicators::follow_reading`), and takes away when
//! nothing does.
//!
//! - **Gone, not Passive**, when nothing reads: the item's connection is
//!   closed, so the watcher drops it (`StatusNotifierItemUnregistered`).
//!   The spec only says a `Passive` item is "likely" hidden, and hosts
//!   differ (waybar showed passive items for years); an indicator that
//!   may linger while nothing reads teaches users to ignore it. While it
//!   is there its status is `Active`.
//! - **Its own connection**, not the one that owns `org.contextd.Broker1`:
//!   a sandboxed app allowed to talk to the broker (xdg-dbus-proxy lets
//!   it reach every object of that name's owner) cannot read who else
//!   reads from the menu, nor press its entries. The connection owns
//!   `org.kde.StatusNotifierItem-PID-N`, the name the spec suggests.
//! - **For the tray only** ([`is_tray`]): who reads (the tooltip's text
//!   and the menu's End entries) is shown, and clicks are taken, only
//!   for the connection that owns `org.kde.StatusNotifierWatcher` or an
//!   `org.kde.StatusNotifierHost-…` name, as the bus says; any other app
//!   that finds the item sees no names and clicks nothing.
//! - **Its entries only lower what is shared**: End (a reader, as
//!   `Consent1.EndReader` does) and Pause all sharing (as
//!   `Consent1.SetPaused(true)`), with no polkit check, since the host
//!   that relays the click is not the user's authentication; resuming is
//!   not offered here (the dashboard or `contextctl resume`). Open the
//!   dashboard runs `contextctl dashboard`, which asks polkit like any
//!   management call and hands the browser the one-time link in a private
//!   file.
//! - **Not on GNOME with the extension**: while GNOME Shell shows its own
//!   indicator (`org.contextd.Indicator1.Watch`, accepted only from the
//!   shell), no item is registered, so GNOME with AppIndicator shows one
//!   indicator, not two.
//! - Off with `[ui] indicator = false`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::sync::watch;
use zbus::message::Header;
use zbus::object_server::SignalEmitter;
use zbus::wire::{OwnedObjectPath, OwnedVariant, Structure, Variant};
use zbus::{Connection, interface};

use super::Handles;
use crate::core::reading::ReadingView;
use crate::shutdown::Level;

pub(crate) const ITEM_PATH: &str = "/StatusNotifierItem";
pub(crate) const MENU_PATH: &str = "/MenuBar";
const WATCHER: &str = "org.kde.StatusNotifierWatcher";
const WATCHER_PATH: &str = "/StatusNotifierWatcher";
/// The names trays' hosts own (`org.kde.StatusNotifierHost-PID-N`).
const HOST_PREFIX: &str = "org.kde.StatusNotifierHost";
/// The themed icon (Adwaita and Breeze have it): an eye.
pub(crate) const ICON: &str = "view-reveal-symbolic";

/// Menu ids that never change; readers get ids from [`FIRST_READER`] on,
/// never reused, so that a click on a layout the host fetched before a
/// change never ends another reader.
const HEADER: i32 = 1;
const SEPARATOR: i32 = 2;
const PAUSE: i32 = 3;
const DASHBOARD: i32 = 4;
const FIRST_READER: i32 = 100;

/// Start the indicator on the publishers' level: a task that registers
/// the item while someone reads and `shell_shows` is `None`.
pub(crate) fn start(
    core: Arc<Handles>,
    address: Option<String>,
    shell_shows: watch::Receiver<Option<String>>,
    level: &Level,
) {
    level.spawn(run(core, address, shell_shows, level.clone()));
}

/// The menu as last built, and the ids given to its readers.
#[derive(Debug, Default)]
struct MenuState {
    revision: u32,
    reading: Vec<ReadingView>,
    paused: bool,
    ids: HashMap<String, i32>,
    next_id: i32,
}

impl MenuState {
    fn key(r: &ReadingView) -> String {
        if r.id == 0 {
            format!("app:{}", r.app_id)
        } else {
            format!("reader:{}", r.id)
        }
    }

    fn id_of(&mut self, r: &ReadingView) -> i32 {
        let next = &mut self.next_id;
        *self.ids.entry(Self::key(r)).or_insert_with(|| {
            let id = (*next).max(FIRST_READER);
            *next = id.saturating_add(1);
            id
        })
    }

    fn reader_of(&self, id: i32) -> Option<&ReadingView> {
        self.reading
            .iter()
            .find(|r| self.ids.get(&Self::key(r)) == Some(&id))
    }

    fn tooltip(&self) -> String {
        let mut names: Vec<&str> = self.reading.iter().map(|r| r.label.as_str()).collect();
        names.dedup();
        names.join(", ")
    }
}

/// What the item and its menu share.
#[derive(Debug)]
struct Ui {
    core: Arc<Handles>,
    state: Mutex<MenuState>,
}

impl Ui {
    fn lock(&self) -> std::sync::MutexGuard<'_, MenuState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read who reads now into the menu: whether anything changed.
    fn refresh(&self) -> bool {
        let reading = self.core.indicators.reading_now();
        let paused = self.core.manage.paused();
        let mut s = self.lock();
        if s.reading == reading && s.paused == paused && s.revision > 0 {
            return false;
        }
        for r in &reading {
            s.id_of(r);
        }
        s.reading = reading;
        s.paused = paused;
        s.revision = s.revision.wrapping_add(1);
        true
    }
}

/// Whether the caller of `hdr` is the tray: the connection that owns the
/// `org.kde.StatusNotifierWatcher` name, or one that owns a
/// `org.kde.StatusNotifierHost-…` name (a host registers under such a
/// name, as the spec asks, and reads items directly). Asked of the bus on
/// each call (a tray reads the item when it opens the menu or the tooltip:
/// seldom), never taken from the caller. An app on the bus that is
/// neither gets the item without the names of who reads and its clicks do
/// nothing: which apps read is for the user's eyes, and pausing is the
/// user's (`Consent1.SetPaused`, refused to sandboxed apps, polkit for
/// the rest). A Flatpak app cannot reach this connection at all (its
/// bus proxy lets it talk to the broker's name only).
async fn is_tray(conn: &Connection, hdr: Option<&Header<'_>>) -> bool {
    let Some(sender) = hdr.and_then(|h| h.sender()).map(|s| s.as_str().to_owned()) else {
        return false;
    };
    let Ok(dbus) = zbus::fdo::DBusProxy::new(conn).await else {
        return false;
    };
    let owns = |name: String| {
        let dbus = &dbus;
        let sender = &sender;
        async move {
            let Ok(name) = zbus::names::BusName::try_from(name) else {
                return false;
            };
            dbus.get_name_owner(name)
                .await
                .is_ok_and(|o| o.as_str() == sender)
        }
    };
    if owns(WATCHER.to_owned()).await {
        return true;
    }
    let Ok(names) = dbus.list_names().await else {
        return false;
    };
    for name in names {
        if name.as_str().starts_with(HOST_PREFIX) && owns(name.to_string()).await {
            return true;
        }
    }
    tracing::debug!(
        sender,
        "the privacy indicator answered an app that is not the tray"
    );
    false
}

struct Item {
    ui: Arc<Ui>,
}

/// An icon as pixels, `(iiay)` (none is sent: the icon is a themed name).
type Pixmap = (i32, i32, Vec<u8>);
/// `(sa(iiay)ss)`: icon name, pixmaps, title, text.
type ToolTip = (String, Vec<Pixmap>, String, String);

#[interface(name = "org.kde.StatusNotifierItem", introspection_docs = false)]
impl Item {
    #[zbus(property)]
    fn category(&self) -> &str {
        "ApplicationStatus"
    }

    #[zbus(property)]
    fn id(&self) -> &str {
        "contextd"
    }

    #[zbus(property)]
    fn title(&self) -> &str {
        "Desktop context is being read"
    }

    #[zbus(property)]
    fn status(&self) -> &str {
        "Active"
    }

    #[zbus(property)]
    fn window_id(&self) -> i32 {
        0
    }

    #[zbus(property)]
    fn icon_name(&self) -> &str {
        ICON
    }

    #[zbus(property)]
    fn icon_pixmap(&self) -> Vec<Pixmap> {
        Vec::new()
    }

    #[zbus(property)]
    fn overlay_icon_name(&self) -> &str {
        ""
    }

    #[zbus(property)]
    fn attention_icon_name(&self) -> &str {
        ""
    }

    /// Who reads, for the tray only ([`is_tray`]).
    #[zbus(property)]
    async fn tool_tip(
        &self,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Option<Header<'_>>,
    ) -> ToolTip {
        let text = if is_tray(conn, hdr.as_ref()).await {
            self.ui.lock().tooltip()
        } else {
            String::new()
        };
        (
            ICON.to_owned(),
            Vec::new(),
            "Reading your desktop context".to_owned(),
            text,
        )
    }

    /// There is nothing to open but the menu.
    #[zbus(property)]
    fn item_is_menu(&self) -> bool {
        true
    }

    #[zbus(property)]
    fn menu(&self) -> OwnedObjectPath {
        OwnedObjectPath::try_from(MENU_PATH).unwrap_or_default()
    }

    fn context_menu(&self, _x: i32, _y: i32) {}

    fn activate(&self, _x: i32, _y: i32) {}

    fn secondary_activate(&self, _x: i32, _y: i32) {}

    fn scroll(&self, _delta: i32, _orientation: &str) {}

    #[zbus(signal)]
    async fn new_tool_tip(emitter: &SignalEmitter<'_>) -> zbus::Result<()>;

    #[zbus(signal)]
    async fn new_status(emitter: &SignalEmitter<'_>, status: &str) -> zbus::Result<()>;
}

type Props = HashMap<String, OwnedVariant>;

fn prop(v: impl Into<Variant<'static>>) -> Option<OwnedVariant> {
    OwnedVariant::try_from(v.into()).ok()
}

fn props(entries: Vec<(&str, Option<OwnedVariant>)>) -> Props {
    entries
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
        .collect()
}

/// The layout's root, `(ia{sv}av)`.
type Layout = (i32, Props, Vec<OwnedVariant>);

/// One entry of the layout, `(ia{sv}av)`, as a child (in a variant).
fn node(id: i32, p: Props, children: Vec<OwnedVariant>) -> zbus::Result<Structure<'static>> {
    Structure::builder()
        .add_field(id)
        .add_field(p)
        .add_field(children)
        .build()
}

/// Every entry of the menu but the root, with its id; the readers only
/// for the tray (`names`).
fn entries(s: &mut MenuState, names: bool) -> Vec<(i32, Props)> {
    let mut out = vec![(
        HEADER,
        props(vec![
            ("label", prop("Reading your desktop context now:")),
            ("enabled", prop(false)),
        ]),
    )];
    let reading = if names { s.reading.clone() } else { Vec::new() };
    for r in &reading {
        let id = s.id_of(r);
        let p = if r.id == 0 {
            props(vec![
                ("label", prop(format!("{} (read just now)", r.label))),
                ("enabled", prop(false)),
            ])
        } else {
            props(vec![
                ("label", prop(format!("End {} ({})", r.label, r.transport))),
                ("icon-name", prop("window-close-symbolic")),
            ])
        };
        out.push((id, p));
    }
    out.push((SEPARATOR, props(vec![("type", prop("separator"))])));
    out.push((
        PAUSE,
        props(vec![
            (
                "label",
                prop(if s.paused {
                    "Sharing is paused (resume in the dashboard)"
                } else {
                    "Pause all sharing"
                }),
            ),
            ("toggle-type", prop("checkmark")),
            ("toggle-state", prop(i32::from(s.paused))),
            // Resuming needs the user's authentication: not from here.
            ("enabled", prop(!s.paused)),
        ]),
    ));
    out.push((
        DASHBOARD,
        props(vec![("label", prop("Open the dashboard…"))]),
    ));
    out
}

struct Menu {
    ui: Arc<Ui>,
    /// The publishers' level: `contextctl dashboard` runs there, and is
    /// killed when it stops.
    level: Level,
}

#[interface(name = "com.canonical.dbusmenu", introspection_docs = false)]
impl Menu {
    /// The menu from `parent_id` down (it is one level deep).
    async fn get_layout(
        &self,
        parent_id: i32,
        _recursion_depth: i32,
        _property_names: Vec<String>,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Header<'_>,
    ) -> zbus::fdo::Result<(u32, Layout)> {
        let tray = is_tray(conn, Some(&hdr)).await;
        let mut s = self.ui.lock();
        let revision = s.revision;
        let all = entries(&mut s, tray);
        let fail = |e: zbus::Error| zbus::fdo::Error::Failed(e.to_string());
        if parent_id != 0 {
            let p = all
                .into_iter()
                .find(|(id, _)| *id == parent_id)
                .map(|(_, p)| p)
                .ok_or_else(|| zbus::fdo::Error::InvalidArgs(format!("no item {parent_id}")))?;
            return Ok((revision, (parent_id, p, Vec::new())));
        }
        let mut children = Vec::new();
        for (id, p) in all {
            let n = node(id, p, Vec::new()).map_err(fail)?;
            children.push(
                OwnedVariant::try_from(Variant::from(n))
                    .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?,
            );
        }
        let root = props(vec![("children-display", prop("submenu"))]);
        Ok((revision, (0, root, children)))
    }

    async fn get_group_properties(
        &self,
        ids: Vec<i32>,
        _property_names: Vec<String>,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Vec<(i32, Props)> {
        let tray = is_tray(conn, Some(&hdr)).await;
        let mut s = self.ui.lock();
        entries(&mut s, tray)
            .into_iter()
            .filter(|(id, _)| ids.is_empty() || ids.contains(id))
            .collect()
    }

    async fn get_property(
        &self,
        id: i32,
        name: String,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Header<'_>,
    ) -> zbus::fdo::Result<OwnedVariant> {
        let tray = is_tray(conn, Some(&hdr)).await;
        let mut s = self.ui.lock();
        entries(&mut s, tray)
            .into_iter()
            .find(|(i, _)| *i == id)
            .and_then(|(_, mut p)| p.remove(&name))
            .ok_or_else(|| zbus::fdo::Error::InvalidArgs(format!("no {name} on item {id}")))
    }

    /// A click (`clicked`) on an entry, relayed by the tray; other
    /// events, and every event from another caller, are ignored.
    async fn event(
        &self,
        id: i32,
        event_id: String,
        _data: OwnedVariant,
        _timestamp: u32,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Header<'_>,
    ) {
        if event_id == "clicked" && is_tray(conn, Some(&hdr)).await {
            self.clicked(id);
        }
    }

    async fn event_group(
        &self,
        events: Vec<(i32, String, OwnedVariant, u32)>,
        #[zbus(connection)] conn: &Connection,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Vec<i32> {
        if !is_tray(conn, Some(&hdr)).await {
            return Vec::new();
        }
        for (id, event_id, _, _) in events {
            if event_id == "clicked" {
                self.clicked(id);
            }
        }
        Vec::new()
    }

    async fn about_to_show(&self, _id: i32) -> bool {
        self.ui.refresh()
    }

    async fn about_to_show_group(&self, _ids: Vec<i32>) -> (Vec<i32>, Vec<i32>) {
        let updated = if self.ui.refresh() {
            vec![0]
        } else {
            Vec::new()
        };
        (updated, Vec::new())
    }

    #[zbus(property)]
    fn version(&self) -> u32 {
        3
    }

    #[zbus(property)]
    fn text_direction(&self) -> &str {
        "ltr"
    }

    #[zbus(property)]
    fn status(&self) -> &str {
        "normal"
    }

    #[zbus(property)]
    fn icon_theme_path(&self) -> Vec<String> {
        Vec::new()
    }

    #[zbus(signal)]
    async fn layout_updated(
        emitter: &SignalEmitter<'_>,
        revision: u32,
        parent: i32,
    ) -> zbus::Result<()>;
}

impl Menu {
    fn clicked(&self, id: i32) {
        match id {
            PAUSE => {
                if self.ui.core.manage.set_paused(true) {
                    tracing::info!("sharing paused from the indicator");
                }
            }
            DASHBOARD => {
                self.level.spawn(open_dashboard(self.level.token()));
            }
            _ => {
                let reader = self.ui.lock().reader_of(id).map(|r| r.id);
                if let Some(reader) = reader.filter(|r| *r != 0)
                    && self.ui.core.manage.end_reader(reader)
                {
                    tracing::info!(id = reader, "reader ended from the indicator");
                }
            }
        }
    }
}

/// `contextctl dashboard`: the one installed beside this daemon, else the
/// one on `PATH`.
async fn open_dashboard(cancel: tokio_util::sync::CancellationToken) {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("contextctl")))
        .filter(|p| p.exists());
    let program = sibling.unwrap_or_else(|| "contextctl".into());
    let run = tokio::process::Command::new(&program)
        .arg("dashboard")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let run = tokio::time::timeout(std::time::Duration::from_secs(120), run);
    let done = tokio::select! {
        _ = cancel.cancelled() => return,
        done = run => done,
    };
    match done {
        Ok(Ok(st)) if st.success() => {}
        Ok(Ok(st)) => tracing::warn!(%st, "contextctl dashboard failed"),
        Ok(Err(e)) => {
            tracing::warn!(program = %program.display(), error = %e, "cannot run contextctl dashboard")
        }
        Err(_) => tracing::warn!("contextctl dashboard did not finish"),
    }
}

/// The item while it is shown: its connection (closing it takes the item
/// away) and the watcher's owner changes.
struct Shown {
    conn: Connection,
    ui: Arc<Ui>,
    name: String,
    watcher: zbus::fdo::NameOwnerChangedStream,
}

static NEXT_ITEM: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

impl Shown {
    async fn open(core: Arc<Handles>, address: Option<&str>, level: Level) -> zbus::Result<Shown> {
        let ui = Arc::new(Ui {
            core,
            state: Mutex::new(MenuState::default()),
        });
        ui.refresh();
        let builder = match address {
            Some(a) => zbus::connection::Builder::address(a),
            None => zbus::connection::Builder::session(),
        };
        let n = NEXT_ITEM.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("org.kde.StatusNotifierItem-{}-{n}", std::process::id());
        let conn = builder
            .serve_at(ITEM_PATH, Item { ui: ui.clone() })
            .serve_at(
                MENU_PATH,
                Menu {
                    ui: ui.clone(),
                    level,
                },
            )
            .name(name.clone())
            .build()
            .await?;
        let dbus = zbus::fdo::DBusProxy::new(&conn).await?;
        let watcher = dbus
            .receive_name_owner_changed_with_args(&[(0, WATCHER)])
            .await?;
        let shown = Shown {
            conn,
            ui,
            name,
            watcher,
        };
        shown.register().await;
        Ok(shown)
    }

    /// Register with the watcher; an absent watcher is not an error: it
    /// is asked again when it appears.
    async fn register(&self) {
        let r = self
            .conn
            .call_method(
                Some(WATCHER),
                WATCHER_PATH,
                Some(WATCHER),
                "RegisterStatusNotifierItem",
                &(self.name.as_str(),),
            )
            .await;
        match r {
            Ok(_) => tracing::debug!(name = %self.name, "indicator registered"),
            Err(e) => tracing::debug!(error = %e, "no StatusNotifierWatcher to show the indicator"),
        }
    }

    /// Who reads changed: the tooltip and the menu follow.
    async fn update(&self) {
        if !self.ui.refresh() {
            return;
        }
        let revision = self.ui.lock().revision;
        if let Ok(e) = SignalEmitter::new(&self.conn, MENU_PATH) {
            let _ = Menu::layout_updated(&e, revision, 0).await;
        }
        if let Ok(e) = SignalEmitter::new(&self.conn, ITEM_PATH) {
            let _ = Item::new_tool_tip(&e).await;
        }
    }
}

async fn run(
    core: Arc<Handles>,
    address: Option<String>,
    mut shell_shows: watch::Receiver<Option<String>>,
    level: Level,
) {
    let cancel = level.token();
    let mut reading = core.indicators.follow_reading();
    let mut shown: Option<Shown> = None;
    loop {
        let want =
            reading.borrow_and_update().anyone() && shell_shows.borrow_and_update().is_none();
        match (want, shown.as_ref()) {
            (true, None) => {
                match Shown::open(core.clone(), address.as_deref(), level.clone()).await {
                    Ok(s) => shown = Some(s),
                    Err(e) => tracing::warn!(error = %e, "cannot show the privacy indicator"),
                }
            }
            (true, Some(s)) => s.update().await,
            (false, Some(_)) => {
                if let Some(s) = shown.take() {
                    tracing::debug!(name = %s.name, "indicator taken away");
                    let _ = s.conn.close().await;
                }
            }
            (false, None) => {}
        }
        // Whether the watcher (re)appeared; `None`: stop.
        let woke: Option<bool> = {
            let watcher = async {
                match shown.as_mut() {
                    Some(s) => s.watcher.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => None,
                r = reading.changed() => r.ok().map(|()| false),
                r = shell_shows.changed() => r.ok().map(|()| false),
                sig = watcher => Some(
                    sig.as_ref()
                        .and_then(|s| s.args().ok())
                        .is_some_and(|a| a.new_owner().is_some()),
                ),
            }
        };
        match woke {
            None => break,
            Some(true) => {
                if let Some(s) = shown.as_ref() {
                    s.register().await;
                }
            }
            Some(false) => {}
        }
    }
    if let Some(s) = shown.take() {
        let _ = s.conn.close().await;
    }
}
