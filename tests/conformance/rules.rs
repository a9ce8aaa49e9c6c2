//! Request rules, as every backend with a network holds them: the egress proxy
//! reads each request to a host a rule names, through TLS too, and lets through only
//! what the rules allow.

use super::secrets::open_listed;
use super::support;
use sandlot::egress::DenyReason;
use sandlot::session::NetworkUpdate;
use sandlot::ErrorKind;

/// `localhost` is confined to `GET /ok/**` and `POST /ok/form`, minus
/// `/ok/secret/**`; `127.0.0.1` is listed with no rule. Over HTTPS (the proxy sees
/// through with its CA, which the code trusts) and plain HTTP alike, what the rules
/// allow reaches the server and the rest is answered `403` and never sent: another
/// method, another path, a denied path, a path dressed up with an encoded `..`. The
/// unruled host takes any request. Each refusal is in the run's denials, with the
/// rule that decided.
pub(crate) fn request_rules_let_through_only_what_they_allow(backend: &str) {
    let servers = support::EgressServers::start();
    let rules = [
        "GET localhost/ok/**",
        "POST localhost/ok/form",
        "deny localhost/ok/secret/**",
    ];
    let Some(mut session) = open_listed(
        backend,
        rules.try_into().unwrap(),
        Some(&servers.ca),
        |_| {},
    ) else {
        return;
    };
    let code = r#"import http.client, os, ssl, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
def tls(method, path, body=None):
    connection = http.client.HTTPSConnection(
        proxy.hostname, proxy.port, timeout=20, context=ssl.create_default_context())
    connection.set_tunnel('localhost', {tls})
    connection.request(method, path, body=body)
    return connection.getresponse().status
def plain(method, host, path, body=None):
    connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=20)
    connection.request(method, 'http://%s:{echo}%s' % (host, path), body=body)
    return connection.getresponse().status
print(tls('GET', '/ok/a?x=1'), tls('POST', '/ok/form', 'x=1'), tls('POST', '/ok/a', 'x=1'),
      tls('GET', '/ok/secret/key'), tls('GET', '/ok/%2e%2e/admin'), tls('GET', '/admin'))
print(plain('GET', 'localhost', '/ok/b'), plain('DELETE', 'localhost', '/ok/b'),
      plain('GET', 'localhost', '/elsewhere'), plain('POST', '127.0.0.1', '/anything', 'y=2'))
"#
    .replace("{tls}", &servers.echo_tls.to_string())
    .replace("{echo}", &servers.echo.to_string());
    let run = session.run(&code).unwrap();
    assert_eq!(run.exit_code, 0, "{}", run.stderr_text());
    assert_eq!(
        run.stdout_text(),
        "200 200 403 403 403 403\n200 403 403 200\n",
        "{backend}"
    );
    let received: Vec<String> = servers
        .received()
        .iter()
        .map(|head| head.lines().next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        received,
        [
            "GET /ok/a?x=1 HTTP/1.1",
            "POST /ok/form HTTP/1.1",
            "GET /ok/b HTTP/1.1",
            "POST /anything HTTP/1.1",
        ],
        "{backend}"
    );
    let refused: Vec<(String, Option<String>)> = run
        .egress_denied
        .iter()
        .filter_map(|denial| match &denial.reason {
            DenyReason::Request {
                method, path, rule, ..
            } => Some((format!("{method} {path}"), rule.clone())),
            _ => None,
        })
        .collect();
    let deny = Some("deny localhost/ok/secret/**".to_string());
    assert_eq!(
        refused,
        [
            ("POST /ok/a".to_string(), None),
            ("GET /ok/secret/key".to_string(), deny),
            ("GET /ok/%2e%2e/admin".to_string(), None),
            ("GET /admin".to_string(), None),
            ("DELETE /ok/b".to_string(), None),
            ("GET /elsewhere".to_string(), None),
        ],
        "{backend}: {:#?}",
        run.egress_denied
    );
}

/// Rules changed on a live session hold from the code's next request: what they
/// now refuse is refused, what they now allow goes; an update that cannot hold
/// (an allow rule for a host the allow-list does not hold) is refused and changes
/// nothing.
pub(crate) fn request_rules_change_on_a_live_session(backend: &str) {
    let servers = support::EgressServers::start();
    let Some(mut session) = open_listed(
        backend,
        ["GET localhost/ok/**"].try_into().unwrap(),
        None,
        |_| {},
    ) else {
        return;
    };
    let code = servers.statuses_code(&["/ok/1", "/later/1"]);
    let statuses = |session: &mut sandlot::Session| {
        let run = session.run(&code).unwrap();
        assert_eq!(run.exit_code, 0, "{backend}: {}", run.stderr_text());
        run.stdout_text().into_owned()
    };
    assert_eq!(statuses(&mut session), "200 403\n", "{backend}");
    session
        .update_network(NetworkUpdate::requests(
            ["GET localhost/later/**"].try_into().unwrap(),
        ))
        .unwrap();
    assert_eq!(statuses(&mut session), "403 200\n", "{backend}");
    assert_eq!(
        session.policy().requests.to_string(),
        "GET localhost/later/**"
    );
    let refused = session
        .update_network(NetworkUpdate::requests(
            ["GET elsewhere.test"].try_into().unwrap(),
        ))
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(refused.to_string().contains("elsewhere.test"), "{refused}");
    assert_eq!(statuses(&mut session), "403 200\n", "{backend}");
}
