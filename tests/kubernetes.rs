//! The Kubernetes backend on a real cluster (the local one `tests/run.sh` starts with
//! `k8s-local/up.sh`; `KUBECONFIG` points at it): what the conformance suite does not
//! already cover. Languages beyond Python, the hardening seen from inside a pod, a
//! kubelet that stops answering, a pool serving concurrent tasks, and a host killed
//! with -9 whose pods `sandlot gc` removes. Without a cluster that answers, the tests
//! that need one pass without running and the suite says so (`support::needs`); CI
//! fails them instead.

mod support;

use sandlot::backend::pool::{Exhausted, PoolOptions};
use sandlot::kubernetes::KubernetesBackend;
use sandlot::{EndReason, Error, PluginHost, PolicyField, Sandlot, Session};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};
use support::needs::{needs, Need};

/// The kubelet test stops the node's kubelet for a while: every other test holds this
/// shared, that one exclusively, so no other test sees a frozen node. Opening a session
/// also reaps the pods of dead owners, which the `gc` test must do itself.
static NODE: RwLock<()> = RwLock::new(());

fn sandlot() -> &'static Sandlot {
    static SANDLOT: OnceLock<Sandlot> = OnceLock::new();
    SANDLOT.get_or_init(|| {
        sandlot::builder(PluginHost::builder().load().unwrap())
            .build()
            .unwrap()
    })
}

/// Whether the cluster answers (see `support::needs`): a test that needs it passes
/// without running where it does not, and fails in CI.
fn cluster_here() -> bool {
    needs(&[Need::Backend("kubernetes")])
}

fn cluster() -> Arc<KubernetesBackend> {
    KubernetesBackend::of(sandlot())
        .unwrap_or_else(|e| panic!("the local cluster is not up ({e}); run tests/run.sh"))
}

fn open(language: &str) -> Session {
    let mut builder = sandlot().session(language);
    builder
        .backend("kubernetes")
        .timeout(Duration::from_secs(120));
    builder
        .open()
        .unwrap_or_else(|e| panic!("cannot open a {language} session on kubernetes: {e}"))
}

fn pod_exists(name: &str) -> bool {
    cluster()
        .sandboxes()
        .unwrap()
        .iter()
        .any(|p| p.name == name)
}

#[test]
fn hello_in_every_language_of_the_issue() {
    if !cluster_here() {
        return;
    }
    let _node = NODE.read().unwrap_or_else(|e| e.into_inner());
    for (language, code) in [
        ("python", "print('hello from python')"),
        ("javascript", "console.log('hello from javascript')"),
        (
            "java",
            "public class Main { public static void main(String[] a) { \
             System.out.println(\"hello from java\"); } }",
        ),
        (
            "cpp",
            "#include <iostream>\nint main() { std::cout << \"hello from cpp\" << std::endl; }",
        ),
        (
            "go",
            "package main\nimport \"fmt\"\nfunc main() { fmt.Println(\"hello from go\") }",
        ),
    ] {
        let mut session = open(language);
        let run = session.run(code).unwrap();
        assert_eq!(
            run.stdout_text(),
            format!("hello from {language}\n"),
            "{language}: {}",
            run.stderr_text()
        );
        assert_eq!(run.backend, "kubernetes");
        session.close();
    }
}

#[test]
fn the_pod_is_hardened_as_the_policy_says() {
    if !cluster_here() {
        return;
    }
    let _node = NODE.read().unwrap_or_else(|e| e.into_inner());
    let mut session = open("bash");
    let run = session
        .run(
            "id -u\nid -g\n\
             touch /usr/sandlot-was-here 2>&1 | grep -o 'Read-only file system'\n\
             grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status\n\
             test -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo token || echo no-token\n\
             chmod u+w /.sandlot/agent 2>&1 | grep -o 'Read-only file system'",
        )
        .unwrap();
    let text = run.stdout_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..3],
        ["1000", "1000", "Read-only file system"],
        "{text}"
    );
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("Seccomp:\t2"), "filtered: {text}");
    assert!(text.contains("no-token"), "{text}");
    assert_eq!(
        lines.last(),
        Some(&"Read-only file system"),
        "the agent is read-only: {text}"
    );
    // What Kubernetes cannot enforce here is said with every run, not assumed.
    assert!(
        run.unenforced.contains(&PolicyField::PidsLimit),
        "{:?}",
        run.unenforced
    );
    if !cluster().enforces_network_policy() {
        assert!(
            run.unenforced.contains(&PolicyField::Network),
            "{:?}",
            run.unenforced
        );
    }
}

/// The node's kubelet stops answering while a run waits on it (SIGSTOP, as a hung
/// kubelet or a cut connection looks from the API server): the run returns an error
/// within its deadline, and the session's pod is gone after close.
/// The names of a pod's init containers, from the API server.
fn init_containers(pod: &str) -> Vec<String> {
    let namespace = cluster().namespace().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = kube::Client::try_default().await.unwrap();
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, &namespace);
        let pod = pods.get(pod).await.unwrap();
        pod.spec
            .and_then(|s| s.init_containers)
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect()
    })
}

#[test]
fn sandlots_images_bring_the_agent_and_other_images_get_it_copied_in() {
    if !needs(&[Need::Backend("kubernetes"), Need::Backend("docker")]) {
        return;
    }
    let _node = NODE.read().unwrap_or_else(|e| e.into_inner());
    // sandlot's own image: its variant with the agent inside, no init container.
    let mut own = open("python");
    let pod = own.sandbox_name().unwrap();
    assert!(init_containers(&pod).is_empty(), "{pod}");
    assert_eq!(own.run("print('own')").unwrap().stdout_text(), "own\n");
    own.close();
    // The variant has no labels of sandlot's containers: the kubelet's containers made
    // from it must not look like sandboxes to `sandlot gc --engine docker`.
    let variant = sandlot::container::variant("sandlot/python:latest");
    let labels = std::process::Command::new("docker")
        .args([
            "image",
            "inspect",
            "--format",
            "{{json .Config.Labels}}",
            &variant,
        ])
        .output()
        .unwrap();
    assert!(labels.status.success(), "{variant} is in the node's engine");
    let labels = String::from_utf8_lossy(&labels.stdout);
    assert!(!labels.contains("sandlot"), "{variant}: {labels}");

    // Any other image: an init container copies the agent in first.
    let foreign = "sandlot-tests/python:foreign";
    let tagged = std::process::Command::new("docker")
        .args(["tag", "sandlot/python:latest", foreign])
        .status()
        .unwrap();
    assert!(tagged.success());
    let mut builder = sandlot().session("python");
    builder.backend("kubernetes").image(foreign);
    let mut session = builder.open().unwrap();
    let pod = session.sandbox_name().unwrap();
    assert_eq!(init_containers(&pod), ["agent"]);
    assert_eq!(
        session.run("print('foreign')").unwrap().stdout_text(),
        "foreign\n"
    );
    session.close();
}

#[test]
fn a_kubelet_that_stops_answering_cannot_hang_a_run() {
    if !cluster_here() {
        return;
    }
    let node = NODE.write().unwrap_or_else(|e| e.into_inner());
    let mut session = open("python");
    assert_eq!(session.run("print(1)").unwrap().stdout_text(), "1\n");
    let name = session.sandbox_name().unwrap();
    let kubelet = std::fs::read_to_string("/run/k8s-local/pids/kubelet.pid")
        .expect("the local cluster's kubelet pid file")
        .trim()
        .to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &kubelet])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig} {kubelet}");
    };
    signal("-STOP");
    let started = Instant::now();
    let options = sandlot::RunOptions {
        timeout: Some(Duration::from_secs(3)),
        ..sandlot::RunOptions::default()
    };
    let outcome = session.run_with("print(2)", options);
    let took = started.elapsed();
    signal("-CONT");
    drop(node);
    match outcome {
        Err(error) => assert!(
            matches!(error, Error::Agent { .. } | Error::SessionEnded { .. }),
            "{error}"
        ),
        Ok(run) => assert!(
            matches!(
                run.end,
                EndReason::SandboxLost { .. } | EndReason::TimedOut { .. }
            ),
            "{:?} {}",
            run.end,
            run.stderr_text()
        ),
    }
    assert!(took < Duration::from_secs(30), "the run took {took:?}");
    session.close();
    let deadline = Instant::now() + Duration::from_secs(30);
    while pod_exists(&name) {
        assert!(Instant::now() < deadline, "{name} is still there");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Three ready pods serve ten sessions from four tasks at once: each session gets a
/// pod of its own, never one another session used.
#[test]
fn a_pool_of_three_serves_ten_sessions_from_four_tasks() {
    if !cluster_here() {
        return;
    }
    let _node = NODE.read().unwrap_or_else(|e| e.into_inner());
    let sandlot = sandlot::builder(PluginHost::builder().load().unwrap())
        .pool(
            "kubernetes",
            PoolOptions {
                min_idle: 3,
                max_size: 3,
                when_exhausted: Exhausted::Wait,
                acquire_timeout: Duration::from_secs(180),
                ..PoolOptions::default()
            },
        )
        .build()
        .unwrap();
    sandlot
        .session("python")
        .backend("kubernetes")
        .warm()
        .unwrap();
    let pool = sandlot.pool("kubernetes").unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while pool.stats().idle < 3 {
        assert!(Instant::now() < deadline, "{:?}", pool.stats());
        std::thread::sleep(Duration::from_millis(100));
    }
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let names = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (sandlot, next, names) = (sandlot.clone(), next.clone(), names.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= 10 {
                    return;
                }
                let mut session = sandlot
                    .session("python")
                    .backend("kubernetes")
                    .open()
                    .unwrap();
                let run = session.run(&format!("print({i} * 2)")).unwrap();
                assert_eq!(
                    run.stdout_text(),
                    format!("{}\n", i * 2),
                    "{}",
                    run.stderr_text()
                );
                names.lock().unwrap().push(session.sandbox_name().unwrap());
                session.close();
            })
        })
        .collect();
    for task in tasks {
        task.join().unwrap();
    }
    let mut names = names.lock().unwrap().clone();
    assert_eq!(names.len(), 10);
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 10, "a pod served two sessions");
    let stats = pool.stats();
    assert!(stats.hits >= 3, "the ready pods served sessions: {stats:?}");
    assert!(stats.size <= 3, "{stats:?}");
    pool.close(Duration::from_secs(30));
    let stats = pool.stats();
    assert_eq!((stats.size, stats.idle), (0, 0), "{stats:?}");
    for name in names {
        assert!(!pod_exists(&name), "{name} outlived the pool");
    }
}

/// A host killed with -9 while its pod runs: the pod is not left running, and `sandlot
/// gc --backend kubernetes` deletes what is left of it.
#[test]
fn a_killed_host_leaves_no_pod_after_gc() {
    if !cluster_here() {
        return;
    }
    let _node = NODE.write().unwrap_or_else(|e| e.into_inner());
    let mut host = support::start_sleeping_host("kubernetes", &[]);
    let pod = cluster()
        .sandboxes()
        .unwrap()
        .into_iter()
        .find(|p| p.owner_pid == Some(host.id()))
        .expect("the host process made a pod");
    assert!(pod.owner_alive);
    host.kill().unwrap();
    host.wait().unwrap();
    let gc = std::process::Command::new(env!("CARGO_BIN_EXE_sandlot"))
        .args(["gc", "--backend", "kubernetes"])
        .output()
        .unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert!(
        String::from_utf8_lossy(&gc.stdout).contains(&pod.name),
        "gc named the pod it removed: {}",
        String::from_utf8_lossy(&gc.stdout)
    );
    assert!(!pod_exists(&pod.name), "{} survived gc", pod.name);
}

/// A bad pod template is refused with what is wrong and where, before any pod is made.
#[test]
fn a_template_that_reaches_the_host_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("pod.yaml");
    std::fs::write(
        &template,
        "spec:\n  volumes: [{ name: root, hostPath: { path: / } }]\n  containers: []\n",
    )
    .unwrap();
    let config = dir.path().join("sandlot.toml");
    std::fs::write(&config, "[kubernetes]\npod_template = \"pod.yaml\"\n").unwrap();
    let sandlot = sandlot::builder(PluginHost::builder().load().unwrap())
        .config(sandlot::Config::read(&config).unwrap())
        .build()
        .unwrap();
    let error = KubernetesBackend::of(&sandlot).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("host path") && message.contains("pod.yaml"),
        "{message}"
    );
}

/// No cluster at the kubeconfig's address: a clear error that says what to do, quickly.
#[test]
fn an_unreachable_cluster_says_how_to_point_at_one() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters: [{ name: k, cluster: { server: \"https://127.0.0.1:1\" } }]\n\
         contexts: [{ name: c, context: { cluster: k, user: u } }]\n\
         users: [{ name: u, user: { token: t } }]\n",
    )
    .unwrap();
    let started = Instant::now();
    let error = KubernetesBackend::builder()
        .kubeconfig(&kubeconfig)
        .connect()
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(15));
    let message = error.to_string();
    assert!(
        matches!(error, Error::EngineUnavailable { .. }),
        "{message}"
    );
    assert!(
        message.contains("127.0.0.1:1") && message.contains("KUBECONFIG"),
        "{message}"
    );
}

/// A pod that another machine made and still runs is not this machine's to delete:
/// `gc` leaves it (a namespace is often shared), but `gc --all` does not.
#[test]
fn gc_leaves_the_running_pods_of_other_machines() {
    if !cluster_here() {
        return;
    }
    let _node = NODE.write().unwrap_or_else(|e| e.into_inner());
    let kubectl = std::env::var("K8S_LOCAL_KUBECTL")
        .unwrap_or_else(|_| "/var/cache/k8s-local/bin/kubectl".into());
    let name = format!("sandlot-elsewhere-{}", std::process::id());
    // Never starts (no such image on the node): Pending, as a pod of a busy machine.
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": { "sandlot.dev/managed": "true", "sandlot.dev/language": "python" },
            "annotations": { "sandlot.dev/owner": "another-machine-boot:4242:1:pid:[1]" },
        },
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{ "name": "sandbox", "image": "sandlot/not-here:1", "imagePullPolicy": "Never" }],
        },
    });
    let mut apply = std::process::Command::new(&kubectl)
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut apply.stdin.take().unwrap(), pod.to_string().as_bytes())
        .unwrap();
    assert!(apply.wait().unwrap().success());
    let found = cluster().sandboxes().unwrap();
    let elsewhere = found.iter().find(|p| p.name == name).expect("listed");
    assert!(
        elsewhere.owner_alive,
        "another machine's owner cannot be looked up"
    );
    assert_eq!(elsewhere.owner_pid, Some(4242));
    let removed = cluster().gc(false).unwrap();
    assert!(!removed.contains(&name), "{removed:?}");
    assert!(pod_exists(&name));
    let removed = cluster().gc(true).unwrap();
    assert!(removed.contains(&name), "{removed:?}");
    assert!(!pod_exists(&name));
}
