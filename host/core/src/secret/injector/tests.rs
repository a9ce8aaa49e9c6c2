//! The rewriter against the places a placeholder can be put, bound and not.

use super::*;
use crate::egress::http::{read_head, Head};
use crate::secret::{Secret, Secrets};

const VALUE: &str = "sk-live-0123456789abcdef+/=";

/// The secret `TOKEN` bound to `binding`, and what the sandbox holds for it.
fn bound(binding: &str) -> (Secrets, String) {
    let secret = Secret::new("TOKEN", VALUE)
        .unwrap()
        .bound_to(binding.parse().unwrap())
        .unwrap();
    let secrets = Secrets::new(vec![secret], Default::default()).unwrap();
    let placeholder = secrets.env().next().unwrap().1;
    (secrets, placeholder)
}

fn request(head: &str) -> Request {
    match read_head(head.as_bytes()) {
        Head::Request(request) => request,
        other => panic!("{other:?}"),
    }
}

/// The head the server gets for `head` sent to `host`, and the secrets put in.
fn injected(secrets: &Secrets, host: &str, head: &str) -> (String, Vec<String>) {
    let mut request = request(head);
    let mut path = match &request.target {
        crate::egress::http::Target::Origin { path } => path.clone(),
        other => panic!("{other:?}"),
    };
    let names = secrets.injector().inject(host, &mut request, &mut path);
    let head = request.for_server(host, 80, &path);
    (String::from_utf8(head).unwrap(), names)
}

#[test]
fn the_sandbox_holds_a_placeholder_as_long_as_the_value_and_unlike_it() {
    let (_, placeholder) = bound("api.example.com");
    assert_eq!(placeholder.len(), VALUE.len());
    assert_ne!(placeholder, VALUE);
    let (_, again) = bound("api.example.com");
    assert_ne!(placeholder, again, "each session makes its own");
}

#[test]
fn a_bearer_token_is_put_in_for_a_bound_host_only() {
    let (secrets, ph) = bound("api.example.com");
    let head = format!("GET /v1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}\r\n\r\n");
    let (sent, names) = injected(&secrets, "api.example.com", &head);
    assert!(
        sent.contains(&format!("Authorization: Bearer {VALUE}\r\n")),
        "{sent}"
    );
    assert!(!sent.contains(&ph), "{sent}");
    assert_eq!(names, ["TOKEN"]);

    let (sent, names) = injected(&secrets, "evil.example.org", &head);
    assert!(!sent.contains(VALUE), "{sent}");
    assert!(sent.contains(&ph), "{sent}");
    assert!(names.is_empty());
}

#[test]
fn a_placeholder_outside_its_place_stays_a_placeholder() {
    let (secrets, ph) = bound("api.example.com");
    for head in [
        format!("GET /v1?q={ph} HTTP/1.1\r\nHost: x\r\n\r\n"),
        format!("GET /v1 HTTP/1.1\r\nHost: x\r\nX-Other: Bearer {ph}\r\n\r\n"),
        format!("GET /v1 HTTP/1.1\r\nHost: x\r\nAuthorization: Token {ph}\r\n\r\n"),
        format!("GET /v1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ph}x\r\n\r\n"),
        format!("GET /{ph} HTTP/1.1\r\nHost: x\r\n\r\n"),
    ] {
        let (sent, names) = injected(&secrets, "api.example.com", &head);
        assert!(!sent.contains(VALUE), "{sent}");
        assert!(names.is_empty(), "{head}");
    }
}

#[test]
fn basic_credentials_get_the_value_wherever_the_placeholder_is_in_them() {
    let (secrets, ph) = bound("git.example.com@basic");
    let b64 = base64::engine::general_purpose::STANDARD;
    let head = format!(
        "GET /repo.git HTTP/1.1\r\nHost: x\r\nAuthorization: basic {}\r\n\r\n",
        b64.encode(format!("x-access-token:{ph}"))
    );
    let (sent, names) = injected(&secrets, "git.example.com", &head);
    let expected = b64.encode(format!("x-access-token:{VALUE}"));
    assert!(
        sent.contains(&format!("Authorization: Basic {expected}\r\n")),
        "{sent}"
    );
    assert_eq!(names, ["TOKEN"]);
}

#[test]
fn a_named_header_and_a_query_parameter_take_it_where_asked() {
    let (secrets, ph) = bound("api.example.com@header:X-Api-Key");
    let head = format!("GET / HTTP/1.1\r\nHost: x\r\nx-api-key: {ph}\r\n\r\n");
    let (sent, _) = injected(&secrets, "api.example.com", &head);
    assert!(sent.contains(&format!("x-api-key: {VALUE}\r\n")), "{sent}");

    let (secrets, ph) = bound("maps.example.com@query:key");
    let head = format!("GET /geo?key={ph}&other={ph}#top HTTP/1.1\r\nHost: x\r\n\r\n");
    let (sent, names) = injected(&secrets, "maps.example.com", &head);
    assert!(
        sent.starts_with(&format!(
            "GET /geo?key=sk-live-0123456789abcdef%2B%2F%3D&other={ph}#top HTTP/1.1\r\n"
        )),
        "{sent}"
    );
    assert_eq!(names, ["TOKEN"]);
}

#[test]
fn a_value_echoed_back_reaches_the_sandbox_as_its_placeholder() {
    let (secrets, ph) = bound("api.example.com");
    let injector = secrets.injector();
    let answer =
        format!("HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nyou sent {VALUE} and {VALUE}");
    // Every split of the answer into two chunks, the value cut anywhere.
    for cut in 0..answer.len() {
        let mut echo = injector.echo();
        let mut seen = echo.push(&answer.as_bytes()[..cut]);
        seen.extend(echo.push(&answer.as_bytes()[cut..]));
        seen.extend(echo.finish());
        let seen = String::from_utf8(seen).unwrap();
        assert_eq!(seen, answer.replace(VALUE, &ph), "cut at {cut}");
    }
}

#[test]
fn output_that_only_begins_like_a_value_is_held_until_it_is_told_apart() {
    let (secrets, _) = bound("api.example.com");
    let injector = secrets.injector();
    let mut echo = injector.echo();
    assert_eq!(echo.push(b"data: sk-live"), b"data: ");
    assert_eq!(echo.push(b"-9\n"), b"sk-live-9\n");
    assert!(echo.finish().is_empty());
}

#[test]
fn a_value_that_cannot_travel_in_a_header_or_be_hidden_is_not_bound() {
    let binding: crate::secret::Binding = "api.example.com".parse().unwrap();
    for value in [
        "short-value",
        "sk-0123456789abcdef\r\nX-Evil: 1",
        "sk-0123456789abcdef\t",
    ] {
        let secret = Secret::new("TOKEN", value).unwrap();
        assert!(secret.bound_to(binding.clone()).is_err(), "{value:?}");
    }
}

#[test]
fn an_unbound_secret_is_still_given_as_its_value() {
    let secrets = Secrets::new(
        vec![Secret::new("PLAIN", "plain-value").unwrap()],
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        secrets.env().collect::<Vec<_>>(),
        [("PLAIN".to_string(), "plain-value".to_string())]
    );
    assert!(secrets.injector().is_empty());
}
