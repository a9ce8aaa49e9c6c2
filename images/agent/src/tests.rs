//! Every message through the wire and back, install tokens, and frames a hostile
//! sandbox could send.

use crate::frame::{read_frame, MAX_FRAME};
use crate::install::{InstallProxy, InstallToken};
use crate::messages::{Entry, ExitReport, Reply, Request, ToolChannel};

fn round_trip_request(request: Request) {
    let mut wire = Vec::new();
    request.write_to(&mut wire).unwrap();
    let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
    assert_eq!(Request::decode(tag, &body).unwrap(), request);
}

fn round_trip_reply(reply: Reply) {
    let mut wire = Vec::new();
    reply.write_to(&mut wire).unwrap();
    let (tag, body) = read_frame(&mut wire.as_slice()).unwrap();
    assert_eq!(Reply::decode(tag, &body).unwrap(), reply);
}

#[test]
fn every_message_survives_the_wire() {
    round_trip_request(Request::Run {
        argv: vec!["python3".into(), "-u".into(), "main.py".into()],
        env: vec![("A".into(), "b=c".into())],
        cwd: "".into(),
        stdin: vec![0, 255, 10],
        timeout_ms: 1500,
        max_output: 1 << 20,
        stop_after: 2 << 20,
        tools: None,
    });
    round_trip_request(Request::Run {
        argv: vec!["sh".into()],
        env: vec![],
        cwd: "".into(),
        stdin: vec![],
        timeout_ms: 1,
        max_output: 2,
        stop_after: 3,
        tools: Some(ToolChannel {
            max_request: 1 << 20,
            max_connections: 64,
        }),
    });
    round_trip_request(Request::ToolAnswer {
        call: u64::MAX,
        frame: br#"{"v":1,"id":1,"ok":true,"value":2}"#.to_vec(),
    });
    round_trip_request(Request::Write {
        path: "a/b.txt".into(),
        data: b"\xff\xfe".to_vec(),
    });
    round_trip_request(Request::Read {
        path: "x".into(),
        max: 7,
    });
    round_trip_request(Request::List { path: "".into() });
    round_trip_request(Request::Scan {
        path: "output".into(),
    });
    round_trip_request(Request::Pack {
        path: "data".into(),
        max: 9,
    });
    round_trip_request(Request::Unpack {
        path: "in".into(),
        data: vec![0; 512],
    });
    round_trip_request(Request::StartKernel {
        argv: vec!["python3".into(), "-c".into(), "driver".into()],
        env: vec![("K".into(), "v".into())],
        cwd: "work".into(),
        timeout_ms: 9000,
    });
    round_trip_request(Request::Cell {
        code: b"x = 1\nx".to_vec(),
        stdin: vec![0xff],
        env: vec![("A".into(), "1".into())],
        cwd: "".into(),
        timeout_ms: 2000,
        max_output: 1 << 20,
        stop_after: 2 << 20,
        grace_ms: 1000,
        tools: Some(ToolChannel {
            max_request: 7,
            max_connections: 1,
        }),
    });
    round_trip_request(Request::StopKernel);
    round_trip_request(Request::Freeze);
    round_trip_request(Request::Thaw);
    round_trip_request(Request::Interrupt);
    round_trip_request(Request::Clear {
        path: "output".into(),
    });
    round_trip_request(Request::Stat { path: "".into() });
    round_trip_request(Request::MakeDir { path: "a/b".into() });
    round_trip_request(Request::Remove { path: "a".into() });
    round_trip_request(Request::Rename {
        from: "a.txt".into(),
        to: "b/c.txt".into(),
    });
    round_trip_reply(Reply::Hello { version: 3 });
    round_trip_reply(Reply::Stdout(vec![0xc3, 0x28]));
    round_trip_reply(Reply::Stderr(b"oops".to_vec()));
    round_trip_reply(Reply::Exit(ExitReport {
        code: 137,
        signal: 9,
        timed_out: true,
        stdout_truncated: false,
        stderr_truncated: true,
        oom_killed: true,
        output_limited: true,
        interrupted: false,
        kernel_ended: true,
        on_request: true,
    }));
    round_trip_reply(Reply::Done);
    round_trip_reply(Reply::Data(vec![1, 2, 3]));
    round_trip_reply(Reply::Entries(vec![Entry {
        path: b"plots/a\xff.png".to_vec(),
        is_dir: false,
        size: 10,
        mtime_ns: 1,
        mode: 0o100644,
    }]));
    round_trip_reply(Reply::Error("no".into()));
    round_trip_reply(Reply::Missing("cannot read `x`: gone".into()));
    round_trip_reply(Reply::ToolCall {
        call: 3,
        frame: br#"{"v":1,"id":1,"op":"list"}"#.to_vec(),
    });
    round_trip_reply(Reply::ToolCallTooLarge {
        call: 4,
        size: u64::MAX,
    });
    round_trip_reply(Reply::Frozen(None));
    round_trip_reply(Reply::Frozen(Some(InstallProxy {
        port: 40123,
        token: InstallToken::random().unwrap(),
    })));
}

#[test]
fn install_tokens_are_random_and_read_back_only_from_their_own_form() {
    let (a, b) = (
        InstallToken::random().unwrap(),
        InstallToken::random().unwrap(),
    );
    assert_ne!(a, b);
    assert!(a.matches(&a) && !a.matches(&b));
    assert_eq!(InstallToken::from_hex(&a.to_hex()), Some(a));
    assert!(!format!("{a:?}").contains(&a.to_hex()));
    let hex = a.to_hex();
    let (longer, signed, wide) = (format!("{hex}0"), format!("+{}", &hex[1..]), "é".repeat(16));
    for bad in [&hex[..31], &longer, &signed, &wide, ""] {
        assert_eq!(InstallToken::from_hex(bad), None, "{bad:?}");
    }
    // A port past u16 or none, and a token of the wrong length, are malformed.
    for port in [70_000u32, 0] {
        let mut body = vec![1];
        body.extend_from_slice(&port.to_le_bytes());
        body.extend_from_slice(&16u32.to_le_bytes());
        body.extend_from_slice(&[0; 16]);
        assert!(Reply::decode(0x8b, &body).is_err(), "port {port}");
    }
    let mut body = vec![1];
    body.extend_from_slice(&80u32.to_le_bytes());
    body.extend_from_slice(&3u32.to_le_bytes());
    body.extend_from_slice(&[0; 3]);
    assert!(Reply::decode(0x8b, &body).is_err());
}

#[test]
fn hostile_frames_are_errors_not_panics() {
    // A count that claims more items than the body holds.
    let mut body = Vec::new();
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(Reply::decode(0x86, &body).is_err());
    // A length prefix past the end.
    assert!(Reply::decode(0x81, &[9, 0, 0, 0, 1]).is_err());
    // Trailing garbage, unknown tags, oversized frames.
    assert!(Reply::decode(0x84, &[1]).is_err());
    assert!(Reply::decode(0x42, &[]).is_err());
    let huge = ((MAX_FRAME + 1) as u32).to_le_bytes();
    assert!(read_frame(&mut huge.as_slice()).is_err());
    let zero = 0u32.to_le_bytes();
    assert!(read_frame(&mut zero.as_slice()).is_err());
}
