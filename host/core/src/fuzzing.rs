//! Entry points for the fuzz targets in `host/fuzz`: each hands untrusted bytes to
//! one of sandlot's parsers and checks what must hold whatever the bytes were. Not
//! part of the API; hidden from the documentation.

use crate::egress::{dns, http, tls, AllowList};
use std::net::Ipv4Addr;
use std::path::Path;

/// A DNS message from a sandbox: read, and if it is a query, answered both ways.
/// An answer always carries the query's id and its question.
pub fn dns_message(bytes: &[u8]) {
    if let dns::Message::Query(query) = dns::read(bytes) {
        for listed in [false, true] {
            let answer = dns::answer(&query, listed, Ipv4Addr::LOCALHOST);
            assert_eq!(answer[..2], bytes[..2], "the id is echoed");
            assert!(answer[2] & 0x80 != 0, "an answer is a response");
        }
    }
}

/// The first bytes of a TLS connection from a sandbox. A name found is lower-case
/// ASCII.
pub fn tls_hello(bytes: &[u8]) {
    if let tls::Hello::Complete(Some(name)) = tls::client_hello(bytes) {
        assert!(name.is_ascii() && !name.is_empty());
        assert_eq!(name, name.to_ascii_lowercase());
    }
}

/// An HTTP request head from a sandbox. The head rewritten for a server is one
/// whole request for the same path, with one `Host` (the target's), one
/// `Connection: close` and nothing after it.
pub fn http_head(bytes: &[u8]) {
    let http::Head::Request(request) = http::read_head(bytes) else {
        return;
    };
    assert!(request.length <= bytes.len());
    let _ = request.host_header();
    let _ = request.body_length();
    if let http::Target::Absolute { host, port, path } = &request.target {
        let rewritten = request.for_server(host, *port, path);
        // Room for every header the proxy reads and the two it adds.
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut again = httparse::Request::new(&mut headers);
        match again.parse(&rewritten) {
            Ok(httparse::Status::Complete(length)) => {
                assert_eq!(length, rewritten.len(), "nothing after the head");
                assert_eq!(again.path, Some(path.as_str()));
                let values = |name: &str| -> Vec<&[u8]> {
                    again
                        .headers
                        .iter()
                        .filter(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| h.value)
                        .collect()
                };
                assert_eq!(values("connection"), [b"close"]);
                let hosts = values("host");
                assert_eq!(hosts.len(), 1);
                let named = std::str::from_utf8(hosts[0]).expect("ASCII");
                let named = http::authority(named, None).map(|(host, _)| host);
                assert_eq!(named.as_deref(), Some(host.as_str()));
            }
            other => panic!("the rewritten head does not parse: {other:?}"),
        }
    }
}

/// A request head from a sandbox holding bound secrets' placeholders (`@1`, `@2`,
/// `@3` and `@4` in `bytes` stand for them, `@5` for Basic credentials holding the
/// third; the first byte picks the host): the
/// rewritten head is one whole head; a value is in it only for its bound host and
/// only in the header or query parameter its binding names; a value echoed back in
/// any chunking reaches the sandbox as its placeholder, the length kept.
pub fn secret_injection(bytes: &[u8]) {
    use crate::secret::{replace_all, Injector, Secret};
    const VALUES: [&str; 4] = [
        "bearer-value-0123456789",
        "header-value-0123456789",
        "basicvalue:0123456789",
        "query/value+0123456789",
    ];
    let Some((&pick, rest)) = bytes.split_first() else {
        return;
    };
    let secrets: Vec<Secret> = ["bearer", "header:X-Api-Key", "basic", "query:key"]
        .iter()
        .zip(VALUES)
        .enumerate()
        .map(|(i, (placement, value))| {
            let binding = format!("api.example.com@{placement}")
                .parse()
                .expect("a binding");
            Secret::new(&format!("S{i}"), value)
                .and_then(|s| s.bound_to(binding))
                .expect("a bound secret")
        })
        .collect();
    let injector = Injector::new(&secrets).expect("placeholders");
    let mut text = rest.to_vec();
    for (i, _) in VALUES.iter().enumerate() {
        let placeholder = injector.placeholder(&format!("S{i}")).expect("bound");
        text = replace_all(
            &text,
            format!("@{}", i + 1).as_bytes(),
            placeholder.as_bytes(),
        );
    }
    // `@5`: Basic credentials holding the third placeholder, which no fuzzer guesses.
    let basic = format!("x:{}", injector.placeholder("S2").expect("bound"));
    let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, basic);
    text = replace_all(&text, b"@5", basic.as_bytes());
    let host = if pick & 1 == 0 {
        "api.example.com"
    } else {
        "other.example.com"
    };

    // What comes back: any chunking, no value left, nothing longer or shorter.
    let cut = usize::from(pick) % (text.len() + 1);
    let (first, second) = (
        replace_all(&text[..cut], b"#", VALUES[0].as_bytes()),
        replace_all(&text[cut..], b"#", VALUES[0].as_bytes()),
    );
    let mut echo = injector.echo();
    let mut back = echo.push(&first);
    back.extend(echo.push(&second));
    back.extend(echo.finish());
    assert_eq!(back.len(), first.len() + second.len());
    assert!(memchr::memmem::find(&back, VALUES[0].as_bytes()).is_none());

    let http::Head::Request(mut request) = http::read_head(&text) else {
        return;
    };
    let http::Target::Origin { path } = &request.target else {
        return;
    };
    let mut path = path.clone();
    let injected = injector.inject(host, &mut request, &mut path);
    if host != "api.example.com" {
        assert!(injected.is_empty());
    }
    let rewritten = request.for_server(host, 443, &path);
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut again = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(length)) = again.parse(&rewritten) else {
        panic!(
            "the rewritten head does not parse: {:?}",
            String::from_utf8_lossy(&rewritten)
        );
    };
    assert_eq!(length, rewritten.len(), "nothing after the head");
    // Each value only where its binding puts it: strip those places, none is left.
    // The pieces kept are joined by a line break, which no value holds: a header
    // named `…head` whose value starts `er-value…` is not a leaked `header-value…`.
    let mut elsewhere = format!("{:?}", again.path).into_bytes();
    for header in again.headers.iter() {
        let placed = ["authorization", "x-api-key"]
            .iter()
            .any(|name| header.name.eq_ignore_ascii_case(name));
        if !placed || host != "api.example.com" {
            for piece in [header.name.as_bytes(), header.value] {
                elsewhere.push(b'\n');
                elsewhere.extend_from_slice(piece);
            }
        }
    }
    if host != "api.example.com" {
        elsewhere.extend_from_slice(&rewritten);
    }
    for (i, value) in VALUES.iter().enumerate() {
        let in_query = i == 3 && host == "api.example.com";
        if !in_query && !rest.windows(value.len()).any(|w| w == value.as_bytes()) {
            assert!(
                memchr::memmem::find(&elsewhere, value.as_bytes()).is_none(),
                "secret {i} outside its place"
            );
        }
    }
}

/// An allow-list as a user writes it. One that parses prints as text that parses to
/// the same list.
pub fn allow_list(text: &str) {
    if let Ok(list) = text.parse::<AllowList>() {
        let again: AllowList = list.to_string().parse().expect("a printed list parses");
        assert_eq!(again, list);
        for probe in ["example.com", "a.example.com", "localhost"] {
            let _ = list.allows_name(probe);
        }
    }
}

/// Request rules as a user writes them (the first line), and a request checked
/// against them (`METHOD HOST TARGET` on the second): rules that parse print as text
/// that parses to the same rules, are not looser than themselves, leave a host they
/// do not name to the allow-list, and never let through a path with a `..` segment
/// to a host they do.
pub fn request_rules(text: &str) {
    use crate::egress::{RequestRules, Ruling};
    let (rules, request) = text.split_once('\n').unwrap_or((text, ""));
    let Ok(rules) = rules.parse::<RequestRules>() else {
        return;
    };
    let again: RequestRules = rules.to_string().parse().expect("printed rules parse");
    assert_eq!(again, rules);
    assert!(!rules.looser_than(&rules), "rules looser than themselves");
    let mut words = request.splitn(3, ' ');
    let method = words.next().unwrap_or("GET");
    let host = words.next().unwrap_or("example.com");
    let target = words.next().unwrap_or("/");
    let ruling = rules.rule(method, host, target);
    if !rules.governs(host) {
        assert_eq!(ruling, Ruling::Unruled);
    } else if target
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .split('/')
        .any(|segment| segment == "..")
    {
        assert!(matches!(ruling, Ruling::Denied { .. }), "{ruling:?}");
    }
}

/// A `sandlot.toml` and a `[policy]` section or `--policy` file.
pub fn config(text: &str) {
    let _ = crate::Config::parse(text, Path::new("/fuzz/sandlot.toml"));
    if let Ok(policy) = crate::Policy::from_toml(text, Path::new("fuzz.toml")) {
        assert!(
            policy.looser_than(&policy).is_empty(),
            "a policy is not looser than itself"
        );
    }
}

/// A plugin's manifest (a runtime's is the wasm backend's: `sandlot_wasm::fuzzing`).
pub fn manifests(text: &str) {
    let _ = toml::from_str::<crate::plugin::manifest::Manifest>(text);
}

/// A plugin file's bytes, as the plugin host inspects them before anything runs.
pub fn plugin_bytes(bytes: &[u8]) {
    let source = crate::PluginSource::File {
        path: "/fuzz/plugin.wasm".into(),
    };
    let _ = crate::plugin::contract::inspect(bytes, &source);
}

/// What a handler answered, as the host checks it: the bytes are split at NUL into
/// file paths, argument lists and environment entries. A path accepted stays below
/// the working directory.
pub fn plugin_answer(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let parts: Vec<&str> = text.split('\u{1}').collect();
    for path in &parts {
        if crate::plugin::handler::check_relative_path(path).is_ok() {
            let mut depth = 0usize;
            for part in Path::new(path).components() {
                match part {
                    std::path::Component::Normal(_) => depth += 1,
                    other => panic!("accepted `{path}` has a {other:?} component"),
                }
            }
            assert!(depth > 0);
        }
    }
    let env: Vec<(String, String)> = parts
        .chunks(2)
        .map(|pair| (pair[0].to_string(), pair.get(1).unwrap_or(&"").to_string()))
        .collect();
    let command = crate::Command {
        phase: crate::Phase::Run,
        argv: parts.iter().map(|p| p.to_string()).collect(),
        env,
        needs_network: false,
    };
    if crate::plugin::handler::check_command(&command).is_ok() {
        assert!(!command.argv[0].is_empty());
        assert!(command.argv.iter().all(|a| !a.contains('\0')));
    }
}

/// A tar archive that came out of a sandbox, unpacked on the host. Whatever it
/// holds, only regular files and directories appear, all inside the destination.
pub fn unpack(bytes: &[u8]) {
    let dest = tempfile::tempdir().expect("a temporary directory");
    let copied = crate::transfer::unpack(bytes, dest.path(), crate::transfer::as_is);
    for file in copied.iter().flat_map(|c| &c.files) {
        assert!(
            dest.path().join(file.as_str()).is_file(),
            "{file} was written"
        );
    }
    let mut stack = vec![dest.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let entry = entry.expect("an entry");
            let kind = entry.file_type().expect("a type");
            assert!(
                kind.is_file() || kind.is_dir(),
                "{} is neither a file nor a directory",
                entry.path().display()
            );
            if kind.is_dir() {
                stack.push(entry.path());
            }
        }
    }
}

/// A name a sandbox chose, as bytes. One that passes as a [`SandboxPath`] shows no
/// control character, and written below a host directory it lands inside it, as a
/// regular file, and nowhere else.
///
/// [`SandboxPath`]: crate::SandboxPath
pub fn sandbox_path(bytes: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = crate::SandboxPath::from_bytes(bytes) else {
        return;
    };
    let shown = path.to_string();
    assert!(
        !shown.chars().any(crate::sandbox_path::is_forbidden),
        "{shown:?}"
    );
    assert!(path
        .components()
        .all(|c| !c.is_empty() && c != "." && c != ".."));
    assert_eq!(crate::SandboxPath::new(path.as_str()).as_ref(), Ok(&path));
    let uri = path.to_uri_path();
    assert!(uri.bytes().all(|b| b.is_ascii_graphic()), "{uri:?}");
    let root = tempfile::tempdir().expect("a temporary directory");
    let dest = root.path().join("dest");
    std::fs::create_dir(&dest).expect("a destination");
    let dir = cap_std::fs::Dir::open_ambient_dir(&dest, cap_std::ambient_authority())
        .expect("the destination opens");
    if path.write_into(&dir, b"x").is_err() {
        // Too long for this file system, say: then nothing may have been written.
        return;
    }
    let mut found = Vec::new();
    let mut stack = vec![root.path().to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).expect("readable") {
            let entry = entry.expect("an entry");
            if entry.file_type().expect("a type").is_dir() {
                stack.push(entry.path());
            } else {
                found.push(entry.path());
            }
        }
    }
    let expected = dest.join(std::ffi::OsStr::from_bytes(path.as_str().as_bytes()));
    assert_eq!(
        found,
        [expected],
        "the one file written is the path below dest"
    );
}

/// A frame from a sandbox's agent, as the host decodes it, and a request frame as the
/// agent does.
pub fn agent_frames(bytes: &[u8]) {
    let mut reader = bytes;
    while let Ok((tag, body)) = sandlot_agent::read_frame(&mut reader) {
        let _ = sandlot_agent::Reply::decode(tag, &body);
        let _ = sandlot_agent::Request::decode(tag, &body);
    }
}

/// A snapshot file from anywhere: read as bytes of unknown origin under both trusts,
/// and, so that the fuzzer reaches what lies behind the seal, the same bytes cut into
/// a manifest, an interpreter state and files and sealed with the host's key. What
/// is accepted reads back: its files, its whole state, its bytes as they came.
pub fn snapshot(bytes: &[u8]) {
    use crate::snapshot::{Snapshot, SnapshotKey, SnapshotTrust, Tag, Writer};
    use std::io::{Read, Write};
    let key = SnapshotKey::from_bytes([7; 32]);
    for trust in [SnapshotTrust::OwnKey, SnapshotTrust::AnyIntact] {
        if let Ok(snapshot) = Snapshot::from_bytes(bytes, &key, trust) {
            assert_eq!(snapshot.to_bytes().expect("it reads back"), bytes);
        }
    }
    fn cut(at: usize, from: &[u8]) -> (&[u8], &[u8]) {
        from.split_at(at.min(from.len()))
    }
    let (manifest, rest) = cut(bytes.first().map_or(0, |b| *b as usize * 4), bytes);
    let (state, files) = cut(bytes.get(1).map_or(0, |b| *b as usize * 16), rest);
    let file = tempfile::tempfile().expect("a temporary file");
    let mut writer = Writer::new(file, true).expect("a writer");
    let write = |out: &mut dyn Write, what: &[u8]| {
        out.write_all(what).map_err(|e| crate::Error::Io {
            context: "fuzz".into(),
            source: e,
        })
    };
    if !state.is_empty() {
        writer
            .section(Tag::STATE, |out| write(out, state))
            .expect("written");
    }
    writer
        .section(Tag::FILES, |out| write(out, files))
        .expect("written");
    writer
        .section(Tag::MANIFEST, |out| write(out, manifest))
        .expect("written");
    let (mut sealed, _) = writer.finish(&key).expect("sealed");
    let mut whole = Vec::new();
    std::io::Seek::rewind(&mut sealed).expect("rewound");
    sealed.read_to_end(&mut whole).expect("read");
    let Ok(snapshot) = Snapshot::from_bytes(&whole, &key, SnapshotTrust::OwnKey) else {
        return;
    };
    assert!(snapshot.signed_here());
    assert_eq!(snapshot.files(u64::MAX).expect("its files"), files);
    if let Some(mut reader) = snapshot.state() {
        let mut read = Vec::new();
        reader.read_to_end(&mut read).expect("its state");
        assert_eq!(read, state);
    }
}

/// A library name a session asked for, read by every installer's grammar. What one
/// takes is a registry name: ASCII, no space or control character, no option, URL or
/// path, and a `/` or `:` only where that installer's names have one.
pub fn library_name(bytes: &[u8]) {
    use crate::library::{Installer, MAX_LEN};
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let installers = [
        Installer::Pip,
        Installer::Npm,
        Installer::Go,
        Installer::Cran,
        Installer::RubyGems,
        Installer::Other,
    ];
    for installer in installers {
        if installer.check(text).is_err() {
            continue;
        }
        assert!(!text.is_empty() && text.len() <= MAX_LEN && text.is_ascii());
        assert!(!text
            .chars()
            .any(|c| c.is_ascii_whitespace() || c.is_ascii_control()));
        assert!(
            !text.starts_with(['-', '.', '/', '~']),
            "{installer:?} {text:?}"
        );
        assert!(
            !text.contains("://") && !text.contains('\\'),
            "{installer:?} {text:?}"
        );
        let slashes = text.matches('/').count();
        match installer {
            Installer::Npm => assert!(slashes == 0 || (slashes == 1 && text.starts_with('@'))),
            Installer::Go => assert!(!text.contains("/.") && !text.contains("//")),
            _ => assert_eq!(slashes, 0, "{installer:?} {text:?}"),
        }
        if !matches!(installer, Installer::RubyGems | Installer::Other) {
            assert!(!text.contains(':'), "{installer:?} {text:?}");
        }
    }
}
