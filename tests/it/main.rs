//! The integration tests: one binary, one module per area (until issue 29
//! each module was a test binary of its own, and each linked the whole
//! crate: building them was most of CI's time).
//!
//! A new test goes into the module of its area, or into a new module here
//! (`tests/it/NAME.rs` and a `mod NAME;` line below). The helpers are the
//! modules `common` (a private bus, the real `contextd`, deadlines),
//! `mcp_support`, `fdo`, `pipewire_client` and `shells`; a test module
//! reaches them with `use crate::common;` and so on. Non-Rust helpers
//! (Python, JavaScript, shell) stay in `tests/<area>/`.
//!
//! Under nextest each test runs in a process of its own; under plain
//! `cargo test` the tests of this binary are threads of one process, so a
//! test that needs its own environment runs this binary again for itself
//! (`fdo_own_notifications`). `mcp_conformance` needs the `conformance`
//! feature (which `make test` builds) and is declared only with it.

mod common;
mod fdo;
mod mcp_support;
mod pipewire_client;
mod shells;

mod backpressure;
mod calendar_eds;
mod canaries;
mod codegen;
mod consent_agents;
mod consent_asking;
mod consent_details;
mod consent_keyring;
mod consent_manage;
mod consent_metadata;
mod consent_policy;
mod consent_prompts;
mod consent_store;
mod context1_replies;
mod contextctl;
mod contextctl_media;
mod daemon_lifecycle;
mod dashboard;
mod dashboard_pages;
mod dashboard_pause;
mod debian13;
mod debian_testing;
mod detail_changes;
mod fanout;
mod faults_db;
mod faults_disk;
mod faults_kill;
mod faults_restart;
mod faults_revoke;
mod fdo_bad_input;
mod fdo_dnd;
mod fdo_location;
mod fdo_match_rules;
mod fdo_mpris;
mod fdo_network;
mod fdo_notifications;
mod fdo_notifications_whole;
mod fdo_own_notifications;
mod fdo_power;
mod fdo_prompt_not_recorded;
mod fdo_restart;
mod fdo_session;
mod fdo_status;
mod history;
mod http_keepalive;
mod http_other_uid;
mod http_slow_heads;
mod indicator_attack;
mod indicator_gnome;
mod indicator_sni;
mod introspection;
mod layering;
mod manpages;
mod mcp_admission;
mod mcp_bridge;
mod mcp_bridge_borrowed;
mod mcp_bridge_starting;
#[cfg(feature = "conformance")]
mod mcp_conformance;
mod mcp_host_gone;
mod mcp_http;
mod mcp_inspector;
mod mcp_minimal_env;
mod mcp_owners;
mod mcp_stdio;
mod mcp_token_expiry;
mod mcpb;
mod not_running;
mod notify_plasma;
mod notify_real_servers;
mod package;
mod pipewire_consent;
mod pipewire_memory;
mod pipewire_microphone;
mod pipewire_playback;
mod pipewire_restart;
mod pipewire_video;
mod portal_dialog;
mod provider;
mod provider_examples;
mod provider_pages;
mod recent_documents;
mod sandbox_boundary;
mod schemas_outputs;
mod scripts;
mod shells_gnome;
mod shells_gnome_consent;
mod shells_gnome_rogue_broker;
mod shells_kwin;
mod shells_only_the_shell;
mod shutdown;
mod slow_readers;
mod store_cipher;
mod store_export;
mod store_key_rotate;
mod store_recovery;
mod store_revoke_full;
mod store_revoke_readonly;
mod subscriptions;
mod systemd_boot;
mod toolkits;
mod upgrade;
mod v4l2_camera;
mod vocabulary_jsonld;
mod wayland;
mod wayland_fake;
mod wayland_selection;
mod window_identity;
mod wlroots;
