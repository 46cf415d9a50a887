//! A test consent agent: implements `org.contextd.ConsentAgent1` as a UI
//! would, answers as told and records every question.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zbus::interface;
use zbus::wire::{OwnedVariant, Variant};

pub const AGENT_PATH: &str = "/org/example/ConsentAgent";

/// `config` with this test program named a trusted consent agent
/// (`[consent] agents`): the broker refuses any other agent but GNOME
/// Shell. `config` must have its `[consent]` section first, or none.
pub fn trusting_this_program(config: &str) -> String {
    let exe = std::env::current_exe().expect("current_exe");
    let line = format!("agents = [{:?}]\n", exe.display().to_string());
    match config.strip_prefix("[consent]\n") {
        Some(rest) => format!("[consent]\n{line}{rest}"),
        None => format!("[consent]\n{line}{config}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub app: HashMap<String, serde_json::Value>,
    pub categories: Vec<String>,
    pub channel: String,
    pub reason: String,
}

#[derive(Debug, Clone)]
pub struct Behaviour {
    /// once, always, duration, deny, cancel, hold (`once` when released)
    pub answer: String,
    pub duration_s: u32,
    /// Wait this long before answering (longer than the broker's prompt
    /// timeout: the broker gives up).
    pub delay: Duration,
}

/// A question withdrawn: its app id and categories.
pub type Cancelled = (String, Vec<String>);

#[derive(Debug, Clone)]
pub struct TestAgent {
    pub asked: Arc<Mutex<Vec<Asked>>>,
    /// The (app id, categories) of every `Cancel`.
    pub cancelled: Arc<Mutex<Vec<Cancelled>>>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    /// For the answer `hold`: answers `once` when released.
    pub release: Arc<tokio::sync::Notify>,
}

impl TestAgent {
    pub fn new(answer: &str) -> TestAgent {
        TestAgent {
            asked: Arc::new(Mutex::new(Vec::new())),
            cancelled: Arc::new(Mutex::new(Vec::new())),
            behaviour: Arc::new(Mutex::new(Behaviour {
                answer: answer.into(),
                duration_s: 0,
                delay: Duration::ZERO,
            })),
            release: Arc::new(tokio::sync::Notify::new()),
        }
    }

    pub fn set(&self, answer: &str, delay: Duration) {
        let mut b = self.behaviour.lock().expect("lock");
        b.answer = answer.into();
        b.delay = delay;
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("lock").clone()
    }

    pub fn cancelled(&self) -> Vec<Cancelled> {
        self.cancelled.lock().expect("lock").clone()
    }
}

#[interface(name = "org.contextd.ConsentAgent1")]
impl TestAgent {
    #[zbus(out_args("answer", "options"))]
    async fn ask(
        &self,
        app: HashMap<String, OwnedVariant>,
        categories: Vec<String>,
        channel: String,
        reason: String,
    ) -> (String, HashMap<String, OwnedVariant>) {
        let app = app
            .iter()
            .map(|(k, v)| (k.clone(), contextd::client::json::to_json(v)))
            .collect();
        self.asked.lock().expect("lock").push(Asked {
            app,
            categories,
            channel,
            reason,
        });
        let mut b = self.behaviour.lock().expect("lock").clone();
        tokio::time::sleep(b.delay).await;
        if b.answer == "hold" {
            self.release.notified().await;
            // What the test set meanwhile, else `once`.
            b.answer = self.behaviour.lock().expect("lock").answer.clone();
            if b.answer == "hold" {
                b.answer = "once".into();
            }
        }
        let mut opts = HashMap::new();
        if b.answer == "duration" {
            opts.insert(
                "duration_s".to_owned(),
                OwnedVariant::try_from(Variant::from(b.duration_s)).expect("owned"),
            );
        }
        (b.answer, opts)
    }

    async fn cancel(&self, app: HashMap<String, OwnedVariant>, categories: Vec<String>) {
        let id = app
            .get("id")
            .map(|v| contextd::client::json::to_json(v))
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        self.cancelled.lock().expect("lock").push((id, categories));
    }
}

/// A broker whose `org.contextd.manage-consent` polkit allows everyone
/// (so that what refuses an agent is the trust check alone), with this
/// test program named a trusted agent: the setup of the agent tests.
pub struct AgentBroker {
    pub bus: super::Bus,
    pub sys: super::Bus,
    pub home: super::Home,
    _polkit: super::dbusmock::Mock,
}

impl AgentBroker {
    /// Buses, polkit and a home whose config.toml is `config` trusting
    /// this program (see [`trusting_this_program`]); no broker yet.
    pub async fn new(config: &str) -> AgentBroker {
        let bus = super::Bus::start();
        let sys = super::Bus::start();
        let polkit =
            super::dbusmock::Mock::polkit_allowing(&sys.address, &["org.contextd.manage-consent"])
                .await;
        let home = super::Home::new();
        home.write_config(&trusting_this_program(config));
        AgentBroker {
            bus,
            sys,
            home,
            _polkit: polkit,
        }
    }

    /// Start the broker with `args`, the system bus being the one with
    /// polkit.
    pub async fn start(&self, args: &[&str]) -> super::Daemon {
        super::Daemon::start_with(
            &self.bus,
            &self.home,
            args,
            &[("DBUS_SYSTEM_BUS_ADDRESS", &self.sys.address)],
        )
        .await
    }
}

/// Serve `agent` on a connection of its own to the bus at `address` and
/// register it as the consent agent: that connection. Served from the
/// start (`Builder::serve_at`): an object added to a running connection
/// can miss the first call made to it.
pub async fn serve_and_register(address: &str, agent: &TestAgent) -> zbus::Connection {
    let conn = zbus::connection::Builder::address(address)
        .serve_at(AGENT_PATH, agent.clone())
        .build()
        .await
        .expect("serve agent");
    contextd::client::proxy::Consent1Proxy::new(&conn)
        .await
        .expect("proxy")
        .register_agent(&zbus::wire::ObjectPath::try_from(AGENT_PATH).expect("path"))
        .await
        .expect("register agent (this program is named in config.toml, polkit allows)");
    conn
}
