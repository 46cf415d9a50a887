//! The dashboard's pages as the user's browser gets them, without a
//! browser: the one-time link (`Consent1.OpenDashboard`, what `contextctl
//! dashboard` opens), its session cookie, then a page of the session.

use std::net::SocketAddr;

use contextd::client::proxy::Consent1Proxy;

use crate::mcp_support;

/// A dashboard session, logged in through a new one-time link.
pub struct Session {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`: the pages' origin.
    pub base: String,
    /// The session's path (the cookie's `Path`).
    pub root: String,
    /// `name=value`, for a `Cookie` header.
    pub cookie: String,
}

impl Session {
    pub async fn open(consent: &Consent1Proxy<'_>) -> Session {
        let url = consent.open_dashboard().await.expect("OpenDashboard");
        let base = url.split("/open?").next().expect("base").to_owned();
        let addr: SocketAddr = base
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("not a loopback URL: {url}"));
        let (status, headers, _) = tokio::task::block_in_place(|| {
            mcp_support::http(addr, "GET", &url[base.len()..], &[], b"")
        });
        assert_eq!(status, 200, "the one-time link opens");
        let set_cookie = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.clone())
            .expect("a session cookie");
        let cookie = set_cookie.split(';').next().expect("cookie").to_owned();
        let root = set_cookie
            .split(';')
            .find_map(|p| p.trim().strip_prefix("Path="))
            .expect("the cookie's path is the session's")
            .to_owned();
        Session {
            addr,
            base,
            root,
            cookie,
        }
    }

    /// One request of this session (its cookie added): status and body.
    pub fn http(
        &self,
        method: &str,
        path: &str,
        hdrs: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut all = vec![("Cookie", self.cookie.as_str())];
        all.extend_from_slice(hdrs);
        let (status, _, body) = tokio::task::block_in_place(|| {
            mcp_support::http(self.addr, method, path, &all, body.as_bytes())
        });
        (status, body)
    }

    /// The HTML of the session's page `page` (`""` for the apps, `"now"`,
    /// `"timeline"`).
    pub fn page(&self, page: &str) -> String {
        let (status, body) = self.http("GET", &format!("{}/{page}", self.root), &[], "");
        assert_eq!(status, 200, "the session's page {page:?}: {body}");
        body
    }
}

/// The HTML of the session's page `page` through a new one-time link.
pub async fn page(consent: &Consent1Proxy<'_>, page: &str) -> String {
    Session::open(consent).await.page(page)
}
