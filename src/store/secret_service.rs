//! The database key in the Secret Service (`org.freedesktop.secrets`:
//! GNOME Keyring, KeePassXC, KWallet's bridge): one item with the attribute
//! `application=contextd`, created on first start. The key then lives in
//! the user's keyring, unlocked with their login.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::StreamExt;
use zbus::Connection;
use zbus::names::BusName;
use zbus::wire::{ObjectPath, OwnedObjectPath, OwnedVariant, Variant};

use super::secret::{DbKey, KeyError};

const DEST: &str = "org.freedesktop.secrets";
const PATH: &str = "/org/freedesktop/secrets";
const SERVICE: &str = "org.freedesktop.Secret.Service";
/// How long the user has to answer an unlock prompt of the keyring.
const PROMPT_TIMEOUT: Duration = Duration::from_secs(60);

type Secret = (OwnedObjectPath, Vec<u8>, Vec<u8>, String);

fn err(e: impl std::fmt::Display) -> KeyError {
    KeyError::SecretService(e.to_string())
}

/// Whether a Secret Service runs on this session bus.
pub(crate) async fn running(conn: &Connection) -> bool {
    let Ok(dbus) = zbus::fdo::DBusProxy::new(conn).await else {
        return false;
    };
    let Ok(name) = BusName::try_from(DEST) else {
        return false;
    };
    dbus.name_has_owner(name).await.unwrap_or(false)
}

async fn call<B, R>(
    conn: &Connection,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Result<R, KeyError>
where
    B: serde::Serialize + zbus::wire::DynamicType,
    R: for<'d> zbus::wire::DynamicDeserialize<'d>,
{
    let reply = conn
        .call_method(Some(DEST), path, Some(iface), method, body)
        .await
        .map_err(err)?;
    reply.body().deserialize::<R>().map_err(err)
}

/// Run a Secret Service prompt (unlock, create) and wait for the user.
async fn prompt(conn: &Connection, path: &OwnedObjectPath) -> Result<bool, KeyError> {
    if path.as_str() == "/" {
        return Ok(true);
    }
    let proxy = zbus::Proxy::new(conn, DEST, path.as_str(), "org.freedesktop.Secret.Prompt")
        .await
        .map_err(err)?;
    let mut completed = proxy.receive_signal("Completed").await.map_err(err)?;
    proxy.call_method("Prompt", &("",)).await.map_err(err)?;
    let msg = tokio::time::timeout(PROMPT_TIMEOUT, completed.next())
        .await
        .map_err(|_| err("the keyring prompt was not answered in 60 s"))?
        .ok_or_else(|| err("the keyring went away during its prompt"))?;
    let (dismissed, _result): (bool, OwnedVariant) = msg.body().deserialize().map_err(err)?;
    Ok(!dismissed)
}

fn attributes() -> HashMap<&'static str, &'static str> {
    HashMap::from([("application", "contextd")])
}

/// The key from the keyring; with `create`, make one when there is none.
pub(crate) async fn get_or_create(
    conn: &Connection,
    create: bool,
) -> Result<Option<DbKey>, KeyError> {
    // "plain": the secret crosses only the local session bus, as with
    // libsecret's default; no DH session needed for that.
    let (_out, session): (OwnedVariant, OwnedObjectPath) = call(
        conn,
        PATH,
        SERVICE,
        "OpenSession",
        &("plain", Variant::from("")),
    )
    .await?;
    let (unlocked, locked): (Vec<OwnedObjectPath>, Vec<OwnedObjectPath>) =
        call(conn, PATH, SERVICE, "SearchItems", &(attributes(),)).await?;
    let mut items = unlocked;
    if items.is_empty() && !locked.is_empty() {
        let (now_unlocked, p): (Vec<OwnedObjectPath>, OwnedObjectPath) =
            call(conn, PATH, SERVICE, "Unlock", &(locked.clone(),)).await?;
        if !now_unlocked.is_empty() {
            items = now_unlocked;
        } else if prompt(conn, &p).await? {
            items = locked;
        } else {
            return Err(err("the user did not unlock the keyring"));
        }
    }
    if let Some(item) = items.first() {
        let secrets: HashMap<OwnedObjectPath, Secret> = call(
            conn,
            PATH,
            SERVICE,
            "GetSecrets",
            &(vec![item.clone()], session.clone()),
        )
        .await?;
        let secret = secrets
            .get(item)
            .ok_or_else(|| err("the keyring returned no secret for our item"))?;
        return DbKey::parse(&secret.2)
            .map(Some)
            .ok_or_else(|| err("the keyring item application=contextd holds no valid key"));
    }
    if !create {
        return Ok(None);
    }
    let key = DbKey::random()?;
    put(conn, &session, &key, false).await?;
    tracing::info!("stored a new database key in the Secret Service");
    Ok(Some(key))
}

/// Store `key` in the item `application=contextd` (replacing the one
/// there when `replace`): `contextctl key rotate` puts the new key where
/// the old one was.
async fn put(
    conn: &Connection,
    session: &OwnedObjectPath,
    key: &DbKey,
    replace: bool,
) -> Result<(), KeyError> {
    let collection: OwnedObjectPath = call(conn, PATH, SERVICE, "ReadAlias", &("default",)).await?;
    if collection.as_str() == "/" {
        return Err(err("the keyring has no default collection"));
    }
    let mut props: HashMap<&str, Variant<'_>> = HashMap::new();
    props.insert(
        "org.freedesktop.Secret.Item.Label",
        Variant::from("contextd database key"),
    );
    props.insert(
        "org.freedesktop.Secret.Item.Attributes",
        Variant::from(attributes()),
    );
    let secret: (ObjectPath<'_>, Vec<u8>, Vec<u8>, &str) = (
        session.as_ref(),
        Vec::new(),
        key.hex().into_bytes(),
        "text/plain",
    );
    let (item, p): (OwnedObjectPath, OwnedObjectPath) = call(
        conn,
        collection.as_str(),
        "org.freedesktop.Secret.Collection",
        "CreateItem",
        &(props, secret, replace),
    )
    .await?;
    if item.as_str() == "/" && !prompt(conn, &p).await? {
        return Err(err("the user refused to store the key in the keyring"));
    }
    Ok(())
}

/// Replace the key in the Secret Service (key rotation).
pub(crate) async fn replace(conn: &Connection, key: &DbKey) -> Result<(), KeyError> {
    let (_out, session): (OwnedVariant, OwnedObjectPath) = call(
        conn,
        PATH,
        SERVICE,
        "OpenSession",
        &("plain", Variant::from("")),
    )
    .await?;
    put(conn, &session, key, true).await
}
