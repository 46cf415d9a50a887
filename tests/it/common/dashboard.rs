//! The dashboard's pages as the user's browser gets them, without a
//! browser: the one-time link (`Consent1.OpenDashboard`, what `contextctl
//! dashboard` opens), its session cookie, then a page of the session.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

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

/// The browser driver (tests/dashboard/browser.py) as a line protocol.
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    pub fn start() -> Browser {
        let axe = crate::common::root().join(".tools/axe/node_modules/axe-core/axe.min.js");
        assert!(
            axe.exists(),
            "no axe-core: run scripts/deps.sh --node ({})",
            axe.display()
        );
        let mut child = Command::new("/usr/bin/python3")
            .arg(crate::common::root().join("tests/dashboard/browser.py"))
            .arg(&axe)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect(
                "start the browser driver (python3-selenium, chromium-driver: scripts/deps.sh)",
            );
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Browser {
            child,
            stdin,
            stdout,
        }
    }

    pub fn cmd(&mut self, c: Value) -> Value {
        tokio::task::block_in_place(|| {
            writeln!(self.stdin, "{c}").expect("to the browser");
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("from the browser");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("browser answered {line:?}: {e}"));
            assert_eq!(v["ok"], true, "browser: {c} failed: {v}");
            v
        })
    }

    /// Navigate; the URL the browser ended at.
    pub fn get(&mut self, url: &str) -> String {
        self.cmd(json!({"op": "get", "url": url}))["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn text(&mut self) -> String {
        self.cmd(json!({"op": "text"}))["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn wait_text(&mut self, text: &str, secs: u64) {
        let found =
            self.cmd(json!({"op": "wait_text", "text": text, "timeout": secs}))["found"] == true;
        if !found {
            let now = self.text();
            panic!("{text:?} did not show within {secs} s; the page says:\n{now}");
        }
    }

    pub fn shot(&mut self, name: &str) {
        let p = out_dir().join(name);
        self.cmd(json!({"op": "screenshot", "path": p}));
    }

    /// A full-page picture of what is shown as `name`.png in
    /// `CONTEXTD_SHOTS`, for a closing note or a review; nothing when it is
    /// not set (`make test`): the pictures are for people, the assertions
    /// are on the DOM, and a full-page PNG of a long page costs the run.
    pub fn picture(&mut self, name: &str) {
        if let Some(d) = std::env::var_os("CONTEXTD_SHOTS").map(PathBuf::from) {
            std::fs::create_dir_all(&d).expect("mkdir");
            let p = d.join(format!("{name}.png"));
            self.cmd(json!({"op": "screenshot", "path": p, "full": true}));
        }
    }

    /// Serious and critical axe-core violations of the page.
    pub fn axe(&mut self) -> Vec<Value> {
        self.cmd(json!({"op": "axe"}))["violations"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the screenshots go: `target/tmp/dashboard/`.
pub fn out_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}
