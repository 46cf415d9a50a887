//! The dashboard's pages as the user's browser gets them, without a
//! browser: the one-time link (`Consent1.OpenDashboard`, what `contextctl
//! dashboard` opens), its session cookie, then a page of the session.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use contextd::client::proxy::Consent1Proxy;

/// One HTTP/1.1 GET on its own connection: status, headers, body.
fn get(addr: SocketAddr, path: &str, cookie: Option<&str>) -> (u16, Vec<(String, String)>, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the dashboard");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .expect("request");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = text[..head.len()]
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        headers,
        if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    )
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// The HTML of the session's page `page` (`""` for the apps, `"now"`,
/// `"timeline"`), through a new one-time link.
pub async fn page(consent: &Consent1Proxy<'_>, page: &str) -> String {
    let url = consent.open_dashboard().await.expect("OpenDashboard");
    let base = url.split("/open?").next().expect("base").to_owned();
    let addr: SocketAddr = base
        .strip_prefix("http://")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not a loopback URL: {url}"));
    let (status, headers, _) = tokio::task::block_in_place(|| get(addr, &url[base.len()..], None));
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
    let (status, _, body) =
        tokio::task::block_in_place(|| get(addr, &format!("{root}/{page}"), Some(&cookie)));
    assert_eq!(status, 200, "the session's page {page:?}: {body}");
    body
}
