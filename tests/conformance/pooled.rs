//! What a pooled sandbox owes the session it is lent to, beyond sharing nothing with
//! the one before (`pooled_sessions_share_nothing`): everything an unpooled one gives.

use super::{build, pool_options, support};
use sandlot::backend::pool::Exhausted;
use sandlot::secret::Secret;
use sandlot::{Network, Policy};

/// A pooled sandbox serves its session whole: a one-shot session's programs each
/// start afresh (the interpreter reset where it keeps state, as unpooled), and a
/// secret bound to a host reaches the sandbox's egress proxy, which puts it into the
/// request to that host (before, the pool's sandbox dropped both: the second
/// program saw the first one's variables, and the placeholder went out as it was).
pub(crate) fn a_pooled_sandbox_serves_its_session_whole(backend: &str) {
    let sandlot = build(Some((backend, pool_options(1, 2, Exhausted::Wait))));
    let mut builder = sandlot.session("python");
    builder.backend(backend).one_shot(true);
    let mut program = builder.open().unwrap();
    program.run("x = 1").unwrap();
    let ran = program.run("print('x' in globals())").unwrap();
    assert_eq!(
        ran.stdout_text(),
        "False\n",
        "{backend}: {}",
        ran.stderr_text()
    );
    drop(program);

    let servers = support::EgressServers::start();
    let value = "sk-pooled-0123456789abcdefgh";
    let secret = Secret::new("TOKEN", value)
        .unwrap()
        .bound_to("localhost".parse().unwrap())
        .unwrap();
    let mut builder = sandlot.session("python");
    builder
        .backend(backend)
        .policy(Policy {
            network: Network::AllowList,
            allow: "localhost 127.0.0.1/32".parse().unwrap(),
            ..Policy::default()
        })
        .secrets(std::slice::from_ref(&secret));
    let mut session = match builder.open() {
        Ok(session) => session,
        Err(error) => {
            assert!(
                backend.starts_with("wasm") || matches!(backend, "docker-tls" | "kubernetes"),
                "{backend}: {error}"
            );
            return;
        }
    };
    let code = format!(
        "import os, urllib.request\n\
         os.environ['no_proxy'] = os.environ['NO_PROXY'] = ''\n\
         request = urllib.request.Request('http://localhost:{}/pooled',\n\
         \x20   headers={{'Authorization': 'Bearer ' + os.environ['TOKEN']}})\n\
         print(urllib.request.urlopen(request, timeout=20).status)",
        servers.echo
    );
    let run = session.run(&code).unwrap();
    assert_eq!(
        run.stdout_text(),
        "200\n",
        "{backend}: {}",
        run.stderr_text()
    );
    let received = servers.received();
    assert!(
        received.len() == 1 && received[0].contains(&format!("Authorization: Bearer {value}")),
        "{backend}: {received:#?}"
    );
}
