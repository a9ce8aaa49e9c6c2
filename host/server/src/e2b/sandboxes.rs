//! The E2B sandboxes this server holds: each one a set of the manager's sessions (a
//! code context each) that belongs to one client, with what E2B keeps beside it
//! (template, metadata, environment, end time, its own access token) and the
//! commands running in it.

use crate::manager::{Ask, ClientId, SessionId};
use sandlot_core::{Interrupt, Network};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// The version of envd this server answers as. The SDKs switch features on by it;
/// 0.5.7 turns on all that this server serves (closing stdin, raw uploads) and
/// nothing past them (file metadata, 0.6.2).
pub const ENVD_VERSION: &str = "0.5.7";

/// A random name nobody can guess: 32 hexadecimal digits from randomly keyed hashes.
pub fn unguessable() -> String {
    format!(
        "{}{}",
        sandlot_core::backend::owner::sandbox_id(),
        sandlot_core::backend::owner::sandbox_id()
    )
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A code context: one session of the manager, with its own interpreter state.
#[derive(Debug, Clone)]
pub struct Context {
    /// Its E2B id.
    pub id: String,
    /// The language, as E2B names it (`python`, `js`, ...).
    pub language: String,
    /// Its working directory, as the SDK gave it.
    pub cwd: String,
    /// The manager's session behind it.
    pub session: SessionId,
    /// Runs so far, for `execution_count`.
    pub executions: u64,
    /// Whether the rich-result hook ([`super::display::HOOK`]) was installed (or
    /// tried) in a Python context's interpreter.
    pub displays: bool,
}

/// A command started through envd's `Process` service.
#[derive(Debug, Clone)]
pub struct Process {
    /// The process's config as the SDK sent it, for `List`.
    pub config: Value,
    /// Its tag, if it was given one.
    pub tag: Option<String>,
    /// Stops it: `SendSignal`, or its deadline.
    pub interrupt: Interrupt,
    /// Its output frames, for those who reconnect (`Connect`).
    pub frames: tokio::sync::broadcast::Sender<bytes::Bytes>,
}

/// What every session of a sandbox opens with, its default context's and every
/// other context's alike: the backend and the policy its create asked for. A context
/// opened later is the same sandbox, so it gets no more than the first (a sandbox
/// made with `allow_internet_access: false` has no network in any context).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Opening {
    /// The backend (`None`: the server's `auto`).
    pub backend: Option<String>,
    /// The network, when the create asked for less than the server's.
    #[serde(default)]
    pub network: Option<Network>,
}

impl Opening {
    /// The ask of a session of `language` in the sandbox.
    pub fn ask(&self, language: &str) -> Ask {
        let mut ask = Ask::new(language);
        ask.backend = self.backend.clone();
        ask.network = self.network;
        ask
    }
}

/// One sandbox as E2B's API knows it: the sessions, contexts and commands behind an
/// E2B sandbox id. Not a [`sandlot_core::backend::Sandbox`]: each of its sessions
/// has one of those.
#[derive(Debug)]
pub struct E2bSandbox {
    /// Its E2B id.
    pub id: String,
    /// Who made it: only this client sees it.
    pub client: ClientId,
    /// The template it was made from.
    pub template: String,
    /// What its sessions open with: the backend and policy its create asked for.
    pub opening: Opening,
    /// Whether that backend has a shell for commands; without one, commands run the
    /// interpreter ([`super::program`]).
    pub shell: bool,
    /// Whether its timeout pauses it rather than kills it (E2B's `autoPause`).
    pub auto_pause: bool,
    /// The caller's metadata, kept as given.
    pub metadata: BTreeMap<String, String>,
    /// Environment of every command and run in it.
    pub env: BTreeMap<String, String>,
    /// When it was made.
    pub started: SystemTime,
    end: Mutex<SystemTime>,
    /// The token its envd and code-interpreter requests carry.
    pub access_token: String,
    /// Its contexts; the first is the default one of its template's language.
    pub contexts: Mutex<Vec<Context>>,
    /// Commands running in it, by pid.
    pub processes: Mutex<BTreeMap<u32, Process>>,
    next_pid: AtomicU32,
}

impl E2bSandbox {
    /// A sandbox of `client` whose default context is `first`, ending `timeout` from
    /// now.
    pub fn new(
        client: ClientId,
        template: String,
        opening: Opening,
        first: Context,
        timeout: Duration,
    ) -> E2bSandbox {
        let started = SystemTime::now();
        E2bSandbox {
            id: format!("i{}", &unguessable()[..20]),
            client,
            template,
            opening,
            shell: false,
            auto_pause: false,
            metadata: BTreeMap::new(),
            env: BTreeMap::new(),
            started,
            end: Mutex::new(started + timeout),
            access_token: unguessable(),
            contexts: Mutex::new(vec![first]),
            processes: Mutex::new(BTreeMap::new()),
            next_pid: AtomicU32::new(1000),
        }
    }

    /// When it ends.
    pub fn end(&self) -> SystemTime {
        *lock(&self.end)
    }

    /// Ends it `timeout` from now.
    pub fn set_timeout(&self, timeout: Duration) {
        *lock(&self.end) = SystemTime::now() + timeout;
    }

    /// A pid for its next command.
    pub fn next_pid(&self) -> u32 {
        self.next_pid.fetch_add(1, Ordering::Relaxed)
    }

    /// The language of its default context, which its commands run in where the
    /// backend has no shell.
    pub fn language(&self) -> String {
        lock(&self.contexts)
            .first()
            .map(|c| c.language.clone())
            .unwrap_or_default()
    }

    /// The manager's sessions behind it.
    pub fn sessions(&self) -> Vec<SessionId> {
        lock(&self.contexts)
            .iter()
            .map(|c| c.session.clone())
            .collect()
    }

    /// The session commands and files go to: the default context's.
    pub fn main_session(&self) -> Option<SessionId> {
        lock(&self.contexts).first().map(|c| c.session.clone())
    }

    /// Whether `given` is its access token, in time that does not depend on where
    /// they differ.
    pub fn admits(&self, given: &str) -> bool {
        crate::serve::same_secret(&self.access_token, given)
    }

    /// What `GET /sandboxes/{id}` and the listing answer; `paused` if its sessions
    /// are.
    pub fn info(&self, cpu_count: u32, memory_mb: u64, paused: bool) -> Value {
        json!({
            "sandboxID": self.id,
            "templateID": self.template,
            "alias": self.template,
            "clientID": self.client.as_str(),
            "metadata": self.metadata,
            "startedAt": rfc3339(self.started),
            "endAt": rfc3339(self.end()),
            "state": if paused { "paused" } else { "running" },
            "cpuCount": cpu_count,
            "memoryMB": memory_mb,
            "diskSizeMB": 0,
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": self.access_token,
            "domain": Value::Null,
        })
    }

    /// What create and connect answer.
    pub fn created(&self) -> Value {
        json!({
            "sandboxID": self.id,
            "templateID": self.template,
            "alias": self.template,
            "clientID": self.client.as_str(),
            "envdVersion": ENVD_VERSION,
            "envdAccessToken": self.access_token,
            "trafficAccessToken": self.access_token,
            "domain": Value::Null,
        })
    }
}

/// What a server with a state directory keeps of a sandbox across its restart: all
/// but its commands, which end with the process. Its sessions are kept by the
/// manager (paused), under the same ids.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    id: String,
    client: String,
    template: String,
    backend: Option<String>,
    /// Kept since sandlot 0.x; a sandbox kept before it had the server's network.
    #[serde(default)]
    network: Option<Network>,
    shell: bool,
    auto_pause: bool,
    metadata: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
    started_ms: u64,
    end_ms: u64,
    access_token: String,
    contexts: Vec<KeptContext>,
}

/// A code context, kept.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeptContext {
    id: String,
    language: String,
    cwd: String,
    session: String,
    executions: u64,
    displays: bool,
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

fn from_unix_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

impl E2bSandbox {
    /// What a restart keeps of it.
    pub fn kept(&self) -> Kept {
        Kept {
            id: self.id.clone(),
            client: self.client.as_str().to_string(),
            template: self.template.clone(),
            backend: self.opening.backend.clone(),
            network: self.opening.network,
            shell: self.shell,
            auto_pause: self.auto_pause,
            metadata: self.metadata.clone(),
            env: self.env.clone(),
            started_ms: unix_ms(self.started),
            end_ms: unix_ms(self.end()),
            access_token: self.access_token.clone(),
            contexts: lock(&self.contexts)
                .iter()
                .map(|c| KeptContext {
                    id: c.id.clone(),
                    language: c.language.clone(),
                    cwd: c.cwd.clone(),
                    session: c.session.as_str().to_string(),
                    executions: c.executions,
                    displays: c.displays,
                })
                .collect(),
        }
    }

    /// The sandbox a restart kept, as it was, with no command running.
    pub fn from_kept(kept: Kept) -> E2bSandbox {
        E2bSandbox {
            id: kept.id,
            client: ClientId::new(kept.client),
            template: kept.template,
            opening: Opening {
                backend: kept.backend,
                network: kept.network,
            },
            shell: kept.shell,
            auto_pause: kept.auto_pause,
            metadata: kept.metadata,
            env: kept.env,
            started: from_unix_ms(kept.started_ms),
            end: Mutex::new(from_unix_ms(kept.end_ms)),
            access_token: kept.access_token,
            contexts: Mutex::new(
                kept.contexts
                    .into_iter()
                    .map(|c| Context {
                        id: c.id,
                        language: c.language,
                        cwd: c.cwd,
                        session: SessionId::from(c.session),
                        executions: c.executions,
                        displays: c.displays,
                    })
                    .collect(),
            ),
            processes: Mutex::new(BTreeMap::new()),
            next_pid: AtomicU32::new(1000),
        }
    }
}

/// Every sandbox of the server.
#[derive(Debug, Default)]
pub struct Sandboxes {
    by_id: Mutex<HashMap<String, Arc<E2bSandbox>>>,
}

impl Sandboxes {
    /// Keeps `sandbox`.
    pub fn insert(&self, sandbox: Arc<E2bSandbox>) {
        lock(&self.by_id).insert(sandbox.id.clone(), sandbox);
    }

    /// Sandbox `id` if `client` made it: another client's is as missing as one that
    /// never was.
    pub fn of(&self, client: &ClientId, id: &str) -> Option<Arc<E2bSandbox>> {
        lock(&self.by_id)
            .get(id)
            .filter(|s| s.client == *client)
            .cloned()
    }

    /// Sandbox `id`, whoever made it (a request that carries its access token).
    pub fn get(&self, id: &str) -> Option<Arc<E2bSandbox>> {
        lock(&self.by_id).get(id).cloned()
    }

    /// The sandboxes of `client`, oldest first.
    pub fn of_client(&self, client: &ClientId) -> Vec<Arc<E2bSandbox>> {
        let mut list: Vec<Arc<E2bSandbox>> = lock(&self.by_id)
            .values()
            .filter(|s| s.client == *client)
            .cloned()
            .collect();
        list.sort_by_key(|s| s.started);
        list
    }

    /// Forgets sandbox `id`; returns it if it was there.
    pub fn remove(&self, id: &str) -> Option<Arc<E2bSandbox>> {
        lock(&self.by_id).remove(id)
    }

    /// Takes out the sandboxes whose end has come.
    pub fn take_expired(&self, now: SystemTime) -> Vec<Arc<E2bSandbox>> {
        let mut by_id = lock(&self.by_id);
        let ids: Vec<String> = by_id
            .values()
            .filter(|s| s.end() <= now)
            .map(|s| s.id.clone())
            .collect();
        ids.iter().filter_map(|id| by_id.remove(id)).collect()
    }

    /// Takes out every sandbox.
    pub fn take_all(&self) -> Vec<Arc<E2bSandbox>> {
        lock(&self.by_id).drain().map(|(_, s)| s).collect()
    }
}

/// `time` as RFC 3339 in UTC with milliseconds, as E2B's API writes times.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = since.as_secs();
    let (days, of_day) = (seconds / 86_400, seconds % 86_400);
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        let at = |s: u64, ms: u64| {
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_796_428_799, 999), "2026-12-04T23:59:59.999Z");
    }

    fn context() -> Context {
        Context {
            id: "c".into(),
            language: "python".into(),
            cwd: "/home/user".into(),
            session: SessionId::from("s-1"),
            executions: 0,
            displays: false,
        }
    }

    #[test]
    fn a_sandbox_is_seen_by_its_client_only() {
        let sandboxes = Sandboxes::default();
        let owner = ClientId::new("a");
        let sandbox = Arc::new(E2bSandbox::new(
            owner.clone(),
            "base".into(),
            Opening::default(),
            context(),
            Duration::from_secs(60),
        ));
        let id = sandbox.id.clone();
        sandboxes.insert(sandbox.clone());
        assert!(sandboxes.of(&owner, &id).is_some());
        assert!(sandboxes.of(&ClientId::new("b"), &id).is_none());
        assert!(sandboxes.of_client(&ClientId::new("b")).is_empty());
        assert!(sandbox.admits(&sandbox.access_token));
        assert!(!sandbox.admits("guess"));
        assert!(sandboxes.take_expired(SystemTime::now()).is_empty());
        sandbox.set_timeout(Duration::ZERO);
        assert_eq!(sandboxes.take_expired(SystemTime::now()).len(), 1);
        assert!(sandboxes.get(&id).is_none());
    }
}
