//! Masking and scrubbing against values split, nested and transformed.

use super::*;

fn secrets() -> Secrets {
    Secrets::new(
        vec![
            Secret::new("KEY", "sk-live-1234").unwrap(),
            Secret::new("LONG", "sk-live-1234-extended").unwrap(),
        ],
        Default::default(),
    )
    .unwrap()
}

#[test]
fn scrubbing_finds_the_forms_interpreters_keep_text_in() {
    let secrets = Secrets::new(
        vec![Secret::new("K", "sk-é\"1").unwrap()],
        Default::default(),
    )
    .unwrap();
    let latin1 = b"a sk-\xe9\"1 b".to_vec();
    let utf16: Vec<u8> = "x sk-é\"1 y"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let utf32: Vec<u8> = "sk-é\"1"
        .chars()
        .flat_map(|c| (c as u32).to_le_bytes())
        .collect();
    // Character for character in each form; UTF-8's `é` is two bytes, two stars.
    let utf8 = "in utf-8: sk-é\"1.".as_bytes().to_vec();
    for (mut bytes, stars) in [(latin1, 6), (utf16, 6), (utf32, 6), (utf8, 7)] {
        let before = bytes.len();
        secrets.scrub(&mut bytes);
        assert_eq!(bytes.len(), before);
        let found = bytes.iter().filter(|b| **b == b'*').count();
        assert_eq!(found, stars, "{bytes:?}");
    }
}

#[test]
fn scrubbing_keeps_the_length_and_finds_values_split_across_writes() {
    let text = b"a sk-live-1234 b sk-live-1234-extended c sk-live-1234".to_vec();
    let mut whole = text.clone();
    secrets().scrub(&mut whole);
    assert_eq!(
        String::from_utf8(whole.clone()).unwrap(),
        "a ************ b ********************* c ************"
    );
    for size in [1, 2, 3, 5, 7, 64] {
        let mut out = Vec::new();
        let secrets = secrets();
        let mut writer = secrets.scrubbing(&mut out);
        for chunk in text.chunks(size) {
            std::io::Write::write_all(&mut writer, chunk).unwrap();
        }
        writer.finish().unwrap();
        assert_eq!(out, whole, "writes of {size}");
    }
}

#[test]
fn a_masker_masks_decoded_json_keys_and_numbers() {
    let masker = Masker::new(vec![
        Secret::new("Q", "sk-\"q\"-ünï").unwrap(),
        Secret::new("N", "31415926").unwrap(),
    ]);
    let decoded = serde_json::json!({
        "text": "sk-\"q\"-ünï and 31415926",
        "nested": [{ "sk-\"q\"-ünï": 314159265 }, 7],
    });
    assert_eq!(
        masker.json(decoded),
        serde_json::json!({
            "text": "*** and ***",
            "nested": [{ "***": "***5" }, 7],
        })
    );
    assert!(Masker::default().is_empty());
}

#[test]
fn every_occurrence_is_masked_and_the_longer_value_wins() {
    let out = secrets().mask(b"a sk-live-1234 b sk-live-1234-extended c".to_vec(), false);
    assert_eq!(String::from_utf8(out).unwrap(), "a *** b *** c");
}

#[test]
fn a_value_split_across_chunks_is_still_masked_when_streamed() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let (mut sink, flush) = secrets().mask_sink(Box::new(move |b: &[u8]| {
        into.lock().unwrap().extend_from_slice(b)
    }));
    for chunk in [
        "key: sk-li",
        "ve-1",
        "234\nnext sk-",
        "live-1234-ext",
        "ended\nend sk-l",
    ] {
        sink(chunk.as_bytes());
    }
    drop(sink);
    flush.flush(false);
    let seen = String::from_utf8(seen.lock().unwrap().clone()).unwrap();
    assert_eq!(seen, "key: ***\nnext ***\nend sk-l");
}

#[test]
fn names_are_masked_and_folded_channels_in_any_case() {
    let secrets = Secrets::new(
        vec![Secret::new("TOKEN", "OpSecret42").unwrap()],
        Default::default(),
    )
    .unwrap();
    let path = SandboxPath::new("output/OpSecret42.txt").unwrap();
    assert_eq!(secrets.mask_path(&path).unwrap(), "output/***.txt");
    assert_eq!(secrets.mask_text("x OpSecret42 y"), "x *** y");
    assert_eq!(
        secrets.mask_text("opsecret42"),
        "opsecret42",
        "bytes match exactly"
    );
    assert_eq!(secrets.mask_folded("opsecret42.evil.net"), "***.evil.net");
    assert_eq!(secrets.mask_folded("OPSECRET42.Evil.Net"), "***.Evil.Net");
}

#[test]
fn an_error_that_quotes_a_value_is_masked_and_others_are_kept() {
    let secrets = Secrets::new(
        vec![Secret::new("TOKEN", "OpSecret42").unwrap()],
        Default::default(),
    )
    .unwrap();
    let quoting = Error::Runtime {
        runtime: "cpython".into(),
        reason: "setting the environment failed: OpSecret42".into(),
    };
    let masked = secrets.mask_error(quoting);
    assert!(matches!(masked, Error::Masked { .. }), "{masked:?}");
    assert!(masked.to_string().ends_with("failed: ***"), "{masked}");
    let plain = secrets.mask_error(Error::ManagerClosed);
    assert!(matches!(plain, Error::ManagerClosed));
}

#[test]
fn a_truncated_output_does_not_end_in_a_values_beginning() {
    let out = secrets().mask(b"leaked: sk-live-12".to_vec(), true);
    assert_eq!(String::from_utf8(out).unwrap(), "leaked: ***");
}

#[test]
fn bad_secrets_are_refused_with_the_reason() {
    let short = Secret::new("PIN", "123").unwrap_err().to_string();
    assert!(
        short.contains("PIN") && short.contains("at least 4"),
        "{short}"
    );
    let name = Secret::new("1BAD NAME", "long enough")
        .unwrap_err()
        .to_string();
    assert!(name.contains("environment variable name"), "{name}");
    let debug = format!("{:?}", Secret::new("KEY", "hunter2hunter2").unwrap());
    assert!(!debug.contains("hunter2"), "{debug}");
}
