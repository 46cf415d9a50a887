//! App icons for the dashboard's pages, served by the dashboard itself
//! (`/s/CAP/icon/APP`): the page's Content-Security-Policy allows images
//! from the dashboard only (`img-src 'self'`, no `data:`), and nothing is
//! fetched from anywhere else.
//!
//! Which icon: the one of the desktop entry that may speak for the app
//! (`desktop_entry::display_of`: a Flatpak's own exported entry, a
//! Snap's, a system program's; never an entry found by a name anyone can
//! take). An icon name is looked up as the icon theme specification's
//! fallback does it, in the `hicolor` theme of every XDG data directory
//! (scalable first, then the sizes nearest 48 px), then in `pixmaps`.
//! An absolute `Icon=` path is taken only when it names a PNG or SVG
//! file. Either way the file must be small and look like what its name
//! says (a PNG's signature, an SVG's `<svg`): a desktop entry is anyone's
//! to write, and the dashboard serves images, not whatever file an entry
//! names. An SVG is served under the dashboard's CSP (`default-src
//! 'none'`), and a page shows it in an `<img>`, where no script of it runs.

use std::path::{Path, PathBuf};

/// An icon file larger than this is not served (icons are a few KiB).
const MAX_ICON_BYTES: u64 = 512 * 1024;
/// The theme's size directories tried after `scalable`, nearest 48 px first.
const SIZES: [&str; 8] = [
    "48x48", "64x64", "32x32", "96x96", "128x128", "256x256", "24x24", "512x512",
];

/// An icon ready to send: its bytes and MIME type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Icon {
    pub(super) mime: &'static str,
    pub(super) bytes: Vec<u8>,
}

/// The icon of `app_id`'s desktop entry, when one may speak for it and
/// its file is found and is an image. Blocking (file system): call from a
/// blocking task.
pub(super) fn of_app(app_id: &str) -> Option<Icon> {
    let entry = crate::desktop_entry::display_of(app_id)?;
    let name = entry.icon?;
    let roots: Vec<PathBuf> = crate::desktop_entry::xdg_application_dirs()
        .iter()
        .filter_map(|d| d.parent().map(Path::to_path_buf))
        .collect();
    find(&name, &roots)
}

/// Find icon `name` (a name or an absolute path) under the data
/// directories `roots`.
pub(super) fn find(name: &str, roots: &[PathBuf]) -> Option<Icon> {
    if name.starts_with('/') {
        return load(Path::new(name));
    }
    // A name is one path component: `../x` or `a/b` is no icon name.
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return None;
    }
    for root in roots {
        let theme = root.join("icons/hicolor");
        let mut candidates = vec![theme.join("scalable/apps").join(format!("{name}.svg"))];
        for size in SIZES {
            let dir = theme.join(size).join("apps");
            candidates.push(dir.join(format!("{name}.png")));
            candidates.push(dir.join(format!("{name}.svg")));
        }
        for c in candidates {
            if let Some(icon) = load(&c) {
                return Some(icon);
            }
        }
    }
    for root in roots {
        for ext in ["png", "svg"] {
            if let Some(icon) = load(&root.join("pixmaps").join(format!("{name}.{ext}"))) {
                return Some(icon);
            }
        }
    }
    None
}

/// The file at `path` when it is a small PNG or SVG that looks like one.
fn load(path: &Path) -> Option<Icon> {
    let mime = match path.extension()?.to_str()? {
        "png" => "image/png",
        "svg" => "image/svg+xml",
        _ => return None,
    };
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_ICON_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let looks_right = match mime {
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        _ => {
            let head =
                String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]).to_ascii_lowercase();
            head.contains("<svg")
        }
    };
    looks_right.then_some(Icon { mime, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The theme's scalable icon first, then a size, then pixmaps; a
    /// path outside the icon directories, a file that is no image, a
    /// name that climbs out: nothing.
    #[test]
    fn finds_theme_icons_and_refuses_what_is_no_image() {
        let d = tempfile::tempdir().expect("tempdir");
        let root = d.path().to_path_buf();
        let put = |rel: &str, bytes: &[u8]| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
            std::fs::write(&p, bytes).expect("write");
            p
        };
        let svg = b"<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>";
        let png = b"\x89PNG\r\n\x1a\nrest";
        put("icons/hicolor/48x48/apps/a.png", png);
        put("icons/hicolor/scalable/apps/a.svg", svg);
        put("pixmaps/b.png", png);
        let secret = put("secret.png", b"not an image at all");
        let roots = [root.clone()];
        assert_eq!(find("a", &roots).map(|i| i.mime), Some("image/svg+xml"));
        assert_eq!(find("b", &roots).map(|i| i.mime), Some("image/png"));
        assert_eq!(find("c", &roots), None);
        assert_eq!(find(&secret.display().to_string(), &roots), None);
        assert_eq!(find("../secret", &roots), None);
        assert_eq!(find("/etc/passwd", &roots), None);
        let abs = put("elsewhere/x.png", png);
        assert!(find(&abs.display().to_string(), &roots).is_some());
    }
}
