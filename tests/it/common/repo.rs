//! Where the repository is, for the tests (`tests/it/common`) and the
//! benches (`benches/common.rs` includes this file by path).

/// The repository this test or bench runs in: the run's `CARGO_MANIFEST_DIR` (cargo
/// and nextest set it for the test process), else the directory this
/// binary was built from. Why not `env!` alone: the machine's shared build
/// dir reuses a test binary built in another clone of the same sources,
/// and `env!("CARGO_MANIFEST_DIR")` is that clone's directory, its scripts
/// and fixtures, not these.
pub fn root() -> &'static std::path::Path {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .filter(|p| p.join("Cargo.toml").is_file())
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
    })
}

/// `rel` (a path inside the repository) as a full path, as text.
pub fn repo_file(rel: &str) -> String {
    root().join(rel).to_string_lossy().into_owned()
}
