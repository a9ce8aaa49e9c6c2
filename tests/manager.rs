//! The session manager the servers stand on: sessions owned by clients, with idle
//! timeouts, lifetimes, per-client limits, a policy clients can only tighten, and a
//! shutdown that leaves no sandbox behind. Python on wasm, and on Docker where a
//! sandbox left behind would be a container.
//!
//! Needs the Python runtime installed and Docker running with sandlot's images
//! (`tests/run.sh` does both), and the local cluster for one test; without them, the
//! tests that need them pass without running and the suite says so
//! (`support::needs`); CI fails them instead.

mod support;

use sandlot::backend::Backend;
use sandlot::server::manager::{ClientId, ManagerSettings, SessionId, SessionManager};
use sandlot::service::Service;
use sandlot::OpenRequest;
use sandlot::{BackendChoice, Error, Network, Policy, RunOptions};
use std::time::{Duration, Instant};
use support::needs::{needs, Need};

/// Whether the Python runtime of the wasm backend is here (see `support::needs`): a
/// test of sessions on wasm passes without running where it is not, and fails in CI.
fn wasm() -> bool {
    needs(&[Need::Runtime("python")])
}

/// Whether Docker with sandlot's images is here, as [`wasm`] asks of the runtime.
fn docker() -> bool {
    needs(&[Need::Backend("docker")])
}

fn manager(settings: ManagerSettings) -> SessionManager {
    let service = Service::from_config(
        sandlot::Config::default(),
        &Default::default(),
        sandlot::providers(),
    )
    .expect("a service from the default configuration");
    SessionManager::new(service, settings).expect("a manager")
}

fn python(manager: &SessionManager, backend: &str) -> OpenRequest {
    let mut request = manager.request("python");
    request.backend = BackendChoice::from(backend);
    request
}

fn run(manager: &SessionManager, client: &ClientId, id: &SessionId, code: &str) -> String {
    let run = manager
        .run(client, id, code, RunOptions::default())
        .unwrap_or_else(|e| panic!("running {code:?}: {e}"));
    assert_eq!(run.exit_code, 0, "{code:?}: {}", run.stderr_text());
    run.stdout_text().into_owned()
}

/// Whether Docker still has a container of this name.
fn container_exists(name: &str) -> bool {
    std::process::Command::new("docker")
        .args(["container", "inspect", "--format", "{{.Name}}", name])
        .output()
        .expect("the docker CLI")
        .status
        .success()
}

#[test]
fn a_session_keeps_its_variables_and_no_other_client_can_reach_it() {
    if !wasm() {
        return;
    }
    let manager = manager(ManagerSettings::default());
    let (alice, mallory) = (ClientId::new("alice"), ClientId::new("mallory"));
    let opened = manager.open(&alice, python(&manager, "wasm")).unwrap();
    assert_eq!(opened.language, "python");
    assert!(opened.persistent, "wasm Python keeps variables");
    run(&manager, &alice, &opened.id, "secret = 6 * 7");
    assert_eq!(run(&manager, &alice, &opened.id, "print(secret)"), "42\n");

    let stolen = manager.run(&mallory, &opened.id, "print(secret)", RunOptions::default());
    let Err(Error::NoSuchSession { reason, .. }) = stolen else {
        panic!("another client reached the session: {stolen:?}");
    };
    assert!(reason.contains("no session of this client"), "{reason}");
    assert!(manager.list(&mallory).is_empty());
    assert_eq!(manager.list(&alice).len(), 1);
    assert!(manager.close(&mallory, &opened.id).is_err());

    manager.close(&alice, &opened.id).unwrap();
    let late = manager
        .run(&alice, &opened.id, "print(1)", RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(late.contains("it was closed"), "{late}");
    let stats = manager.stats();
    assert_eq!((stats.open, stats.opened, stats.closed), (0, 1, 1));
}

#[test]
fn a_client_may_tighten_the_servers_policy_but_never_loosen_it() {
    if !wasm() {
        return;
    }
    let manager = manager(ManagerSettings::default());
    let client = ClientId::new("c");

    let mut looser = python(&manager, "wasm");
    looser.policy.network = Network::On;
    looser.limits.timeout = manager.settings().limits.timeout * 2;
    let Err(Error::NotAllowed { fields }) = manager.open(&client, looser) else {
        panic!("a looser policy was accepted");
    };
    assert_eq!(fields, ["policy.network", "limits.timeout"]);
    // A memory limit of 0 is no limit: refused as the loosest of all.
    let mut unlimited = python(&manager, "wasm");
    unlimited.limits.memory = 0;
    let Err(Error::NotAllowed { fields }) = manager.open(&client, unlimited) else {
        panic!("a session without a memory limit was accepted");
    };
    assert_eq!(fields, ["limits.memory"]);

    let mut stricter = python(&manager, "wasm");
    stricter.policy = Policy {
        network: Network::Off,
        pids_limit: 32,
        ..manager.policy().clone()
    };
    stricter.limits.timeout = Duration::from_secs(5);
    let opened = manager.open(&client, stricter).unwrap();
    assert_eq!(run(&manager, &client, &opened.id, "print('ok')"), "ok\n");
    // Nor can one run of the session go past the server's limits.
    let longer = RunOptions {
        timeout: Some(manager.settings().limits.timeout + Duration::from_secs(1)),
        ..RunOptions::default()
    };
    let Err(Error::NotAllowed { fields }) = manager.run(&client, &opened.id, "print(1)", longer)
    else {
        panic!("a run longer than the server allows");
    };
    assert_eq!(fields, ["limits.timeout"]);
    assert_eq!(manager.stats().open_failures, 2);
}

#[test]
fn each_client_has_its_own_limit_and_the_server_one_for_all() {
    if !wasm() {
        return;
    }
    let manager = manager(ManagerSettings::default().max_per_client(2).max_sessions(3));
    let (a, b) = (ClientId::new("a"), ClientId::new("b"));
    for _ in 0..2 {
        manager.open(&a, python(&manager, "wasm")).unwrap();
    }
    let Err(Error::TooManySessions { scope, limit: 2 }) =
        manager.open(&a, python(&manager, "wasm"))
    else {
        panic!("a third session for one client");
    };
    assert_eq!(scope, "client a");
    manager.open(&b, python(&manager, "wasm")).unwrap();
    let Err(Error::TooManySessions { limit: 3, .. }) = manager.open(&b, python(&manager, "wasm"))
    else {
        panic!("a fourth session on a server of three");
    };

    manager.client_gone(&a);
    assert!(manager.list(&a).is_empty());
    assert_eq!(manager.list(&b).len(), 1);
    manager.open(&b, python(&manager, "wasm")).unwrap();
}

#[test]
fn an_idle_session_closes_and_its_container_goes_with_it() {
    if !docker() {
        return;
    }
    let manager = manager(ManagerSettings::default().idle_timeout(Duration::from_secs(2)));
    let client = ClientId::new("idle");
    let opened = manager.open(&client, python(&manager, "docker")).unwrap();
    let name = manager
        .with_session(&client, &opened.id, |s| Ok(s.sandbox_name()))
        .unwrap()
        .expect("a container name");
    assert!(container_exists(&name));

    // Use keeps it open past the timeout.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(900));
        run(&manager, &client, &opened.id, "print(1)");
    }
    let started = Instant::now();
    while !manager.list(&client).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the idle session never closed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let late = manager
        .run(&client, &opened.id, "print(1)", RunOptions::default())
        .unwrap_err()
        .to_string();
    assert!(late.contains("idle"), "{late}");
    // The sweeper removes the container after it takes the session off the list.
    let closed = Instant::now();
    while container_exists(&name) {
        assert!(
            closed.elapsed() < Duration::from_secs(10),
            "{name} outlived its session"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(manager.stats().expired, 1);
}

#[test]
fn a_session_closes_at_its_lifetime_even_when_used() {
    if !wasm() {
        return;
    }
    let manager = manager(
        ManagerSettings::default()
            .idle_timeout(Duration::from_secs(60))
            .max_lifetime(Duration::from_secs(2)),
    );
    let client = ClientId::new("old");
    let opened = manager.open(&client, python(&manager, "wasm")).unwrap();
    let started = Instant::now();
    let error = loop {
        match manager.run(&client, &opened.id, "print(1)", RunOptions::default()) {
            Ok(_) => assert!(
                started.elapsed() < Duration::from_secs(20),
                "it never ended"
            ),
            Err(e) => break e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(error.contains("maximum lifetime"), "{error}");
}

#[test]
fn shutdown_waits_for_a_running_cell_then_leaves_no_container() {
    if !docker() {
        return;
    }
    let manager = manager(ManagerSettings::default());
    let client = ClientId::new("busy");
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let opened = manager.open(&client, python(&manager, "docker")).unwrap();
        names.push(
            manager
                .with_session(&client, &opened.id, |s| Ok(s.sandbox_name()))
                .unwrap()
                .unwrap(),
        );
        ids.push(opened.id);
    }
    let running = {
        let (manager, client, id) = (manager.clone(), client.clone(), ids[0].clone());
        std::thread::spawn(move || {
            manager.run(
                &client,
                &id,
                "import time; time.sleep(1); print('finished')",
                RunOptions::default(),
            )
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(manager.shutdown(), 2);
    let finished = running
        .join()
        .unwrap()
        .expect("the running cell ran to its end");
    assert_eq!(finished.stdout_text(), "finished\n");
    for name in &names {
        assert!(!container_exists(name), "{name} outlived the shutdown");
    }
    let Err(Error::ManagerClosed) = manager.open(&client, python(&manager, "wasm")) else {
        panic!("a session opened after the shutdown");
    };
}

#[test]
fn dropping_the_last_handle_closes_every_session() {
    if !docker() {
        return;
    }
    let name = {
        let manager = manager(ManagerSettings::default());
        let client = ClientId::new("dropper");
        let opened = manager.open(&client, python(&manager, "docker")).unwrap();
        let clone = manager.clone();
        drop(manager);
        // A clone keeps it alive.
        run(&clone, &client, &opened.id, "print(1)");
        clone
            .with_session(&client, &opened.id, |s| Ok(s.sandbox_name()))
            .unwrap()
            .unwrap()
    };
    assert!(!container_exists(&name), "{name} outlived its manager");
}

#[test]
fn a_backend_that_cannot_enforce_the_network_policy_is_refused() {
    if !needs(&[Need::Backend("kubernetes")]) {
        return;
    }
    let cluster = sandlot::kubernetes::KubernetesBackend::of(&sandlot::from_environment().unwrap())
        .expect("the local cluster (tests/run.sh starts it)");
    let strict = manager(ManagerSettings::default());
    let client = ClientId::new("pods");
    let opened = strict.open(&client, python(&strict, "kubernetes"));
    if cluster.enforces_network_policy() {
        opened.expect("a cluster that enforces NetworkPolicy serves the session");
    } else {
        let Err(Error::BackendUnsuitable {
            backend, reason, ..
        }) = opened
        else {
            panic!("a session whose network cut nobody enforces: {opened:?}");
        };
        assert_eq!(backend, "kubernetes");
        assert!(reason.contains("network policy"), "{reason}");
    }
    assert_eq!(strict.stats().open, 0);

    // A server whose policy lets the network on still asks for limits the cluster
    // may not apply (a per-pod process limit): refused, naming them, until the
    // operator accepts them.
    let open = manager_with_network_on();
    let gaps: Vec<String> = cluster
        .unenforced(&Policy {
            network: Network::On,
            ..Policy::default()
        })
        .iter()
        .map(ToString::to_string)
        .collect();
    if !gaps.is_empty() {
        let Err(Error::BackendUnsuitable { reason, .. }) =
            open.open(&client, python(&open, "kubernetes"))
        else {
            panic!("a session whose {gaps:?} nobody enforces was opened");
        };
        assert!(
            reason.contains(&gaps[0]) && reason.contains("--accept-unenforced"),
            "{reason}"
        );
    }
    open.shutdown();
    let accepting = manager(
        ManagerSettings::default()
            .policy(Policy {
                network: Network::On,
                ..Policy::default()
            })
            .accept_unenforced(
                sandlot::PolicyField::ALL
                    .into_iter()
                    .filter(|f| gaps.contains(&f.to_string())),
            ),
    );
    let opened = accepting
        .open(&client, python(&accepting, "kubernetes"))
        .unwrap();
    assert_eq!(
        run(&accepting, &client, &opened.id, "print('pod')"),
        "pod\n"
    );
    accepting.shutdown();
}

fn manager_with_network_on() -> SessionManager {
    manager(ManagerSettings::default().policy(Policy {
        network: Network::On,
        ..Policy::default()
    }))
}

#[test]
fn one_session_queues_a_bounded_number_of_callers_and_a_closed_one_lets_them_go() {
    use std::sync::mpsc;
    if !wasm() {
        return;
    }
    let manager = manager(ManagerSettings::default());
    let client = ClientId::new("burst");
    let opened = manager.open(&client, python(&manager, "wasm")).unwrap();
    // Holds the session's turn until told to let go.
    let hold = || {
        let (held, is_held) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let (manager, client, id) = (manager.clone(), client.clone(), opened.id.clone());
        let holder = std::thread::spawn(move || {
            manager.with_session(&client, &id, |_| {
                held.send(()).unwrap();
                released.recv().ok();
                Ok(())
            })
        });
        is_held.recv().unwrap();
        (release, holder)
    };
    let callers = |count: usize| {
        let (done, results) = mpsc::channel();
        for _ in 0..count {
            let (manager, client, id) = (manager.clone(), client.clone(), opened.id.clone());
            let done = done.clone();
            std::thread::spawn(move || {
                let run = manager.run(&client, &id, "print(1)", RunOptions::default());
                done.send(run.map(|r| r.stdout_text().into_owned()))
                    .unwrap();
            });
        }
        results
    };

    // Eight in all may wait for one session (the holder is one): of ten more
    // callers, three are refused at once, and the seven others run in turn.
    let (release, holder) = hold();
    let results = callers(10);
    for _ in 0..3 {
        let refused = results
            .recv_timeout(Duration::from_secs(60))
            .expect("a caller past the queue's end is refused at once")
            .expect_err("a caller past the queue's end is refused");
        assert_eq!(refused.kind(), sandlot::ErrorKind::Exhausted, "{refused}");
        assert!(
            refused.to_string().contains("waiting for their turn"),
            "{refused}"
        );
    }
    release.send(()).unwrap();
    holder.join().unwrap().unwrap();
    for _ in 0..7 {
        let ran = results.recv_timeout(Duration::from_secs(60)).unwrap();
        assert_eq!(ran.expect("a queued caller runs"), "1\n");
    }

    // Closing it waits for the run in progress only: the callers queued behind it
    // find it ended instead of running first.
    let (release, holder) = hold();
    let results = callers(3);
    let closing = {
        let (manager, client, id) = (manager.clone(), client.clone(), opened.id.clone());
        std::thread::spawn(move || manager.close(&client, &id))
    };
    let started = Instant::now();
    while manager.list(&client).iter().any(|s| s.id == opened.id) {
        assert!(started.elapsed() < Duration::from_secs(30), "never closing");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    release.send(()).unwrap();
    holder.join().unwrap().unwrap();
    closing.join().unwrap().unwrap();
    for _ in 0..3 {
        let ended = results
            .recv_timeout(Duration::from_secs(60))
            .unwrap()
            .expect_err("a caller queued behind a close does not run");
        assert!(ended.to_string().contains("ended"), "{ended}");
    }
}

/// Closing a session stops the run under way (its client asked for the session to
/// end, not to wait out the run's time limit); a shutdown lets it finish (above).
#[test]
fn closing_a_session_interrupts_its_run() {
    if !wasm() {
        return;
    }
    let manager = manager(ManagerSettings::default());
    let client = ClientId::new("impatient");
    let opened = manager.open(&client, python(&manager, "wasm")).unwrap();
    let running = {
        let (manager, client, id) = (manager.clone(), client.clone(), opened.id.clone());
        std::thread::spawn(move || {
            manager.run(
                &client,
                &id,
                "import time\ntime.sleep(60)\nprint('finished')",
                RunOptions::default(),
            )
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    manager.close(&client, &opened.id).unwrap();
    let run = running.join().unwrap().expect("the run ends, interrupted");
    assert_eq!(run.end, sandlot::EndReason::Interrupted, "{run:?}");
    assert_eq!(run.stdout_text(), "");
}
