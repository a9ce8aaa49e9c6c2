//! The sandbox's DNS server, answered on the host: a listed name resolves to the
//! sandbox's own loopback, where the agent relays port 80 and 443 to the proxy; any
//! other name does not exist. Nothing is ever asked of a real resolver, so a lookup
//! cannot carry data out either (RFC 1035 §4).

/// A question the sandbox asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    id: u16,
    recursion_desired: bool,
    /// The name asked for, lower-cased, without the final dot; bytes that are not
    /// printable ASCII are written `\DDD`, as in a zone file.
    pub name: String,
    /// The record type asked for (1 is A, 28 is AAAA).
    pub kind: u16,
    /// The question section as it came, echoed in the answer.
    question: Vec<u8>,
}

/// Record type A.
pub const A: u16 = 1;
/// Record type AAAA.
#[cfg(test)]
pub const AAAA: u16 = 28;

const HEADER: usize = 12;
const NXDOMAIN: u16 = 3;
const FORMERR: u16 = 1;
const NOTIMP: u16 = 4;

/// What a message the sandbox sent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A standard query with one question.
    Query(Query),
    /// Something to refuse with this answer (a malformed or unsupported message).
    Refuse(Vec<u8>),
    /// Too broken to answer at all.
    Drop,
}

/// Reads a message from the sandbox.
pub fn read(message: &[u8]) -> Message {
    if message.len() < HEADER {
        return Message::Drop;
    }
    let id = u16::from_be_bytes([message[0], message[1]]);
    let flags = u16::from_be_bytes([message[2], message[3]]);
    if flags & 0x8000 != 0 {
        // A response: nothing to answer.
        return Message::Drop;
    }
    let recursion_desired = flags & 0x0100 != 0;
    let refuse = |rcode| Message::Refuse(header(id, recursion_desired, rcode, 0, 0));
    let opcode = (flags >> 11) & 0xf;
    if opcode != 0 {
        return refuse(NOTIMP);
    }
    let questions = u16::from_be_bytes([message[4], message[5]]);
    if questions != 1 {
        return refuse(FORMERR);
    }
    let Some((name, end)) = question_name(message) else {
        return refuse(FORMERR);
    };
    let Some(fixed) = message.get(end..end + 4) else {
        return refuse(FORMERR);
    };
    Message::Query(Query {
        id,
        recursion_desired,
        name,
        kind: u16::from_be_bytes([fixed[0], fixed[1]]),
        question: message[HEADER..end + 4].to_vec(),
    })
}

/// The name of the question after the header, and where it ends. Compression is not
/// allowed in the one question of a query.
fn question_name(message: &[u8]) -> Option<(String, usize)> {
    let mut at = HEADER;
    let mut name = String::new();
    loop {
        let length = usize::from(*message.get(at)?);
        at += 1;
        if length == 0 {
            break;
        }
        if length > 63 {
            return None;
        }
        let label = message.get(at..at + length)?;
        at += length;
        if !name.is_empty() {
            name.push('.');
        }
        for &byte in label {
            match byte {
                b'A'..=b'Z' => name.push(char::from(byte.to_ascii_lowercase())),
                b'!'..=b'~' if byte != b'.' && byte != b'\\' => name.push(char::from(byte)),
                _ => name.push_str(&format!("\\{byte:03}")),
            }
        }
        if at - HEADER > 255 {
            return None;
        }
    }
    Some((name, at))
}

fn header(id: u16, recursion_desired: bool, rcode: u16, questions: u16, answers: u16) -> Vec<u8> {
    // A response, authoritative, recursion available: the sandbox has no other server.
    let flags = 0x8000 | 0x0400 | 0x0080 | u16::from(recursion_desired) << 8 | rcode;
    let mut out = Vec::with_capacity(64);
    for field in [id, flags, questions, answers, 0, 0] {
        out.extend(field.to_be_bytes());
    }
    out
}

/// The answer to `query`: for a listed name, its A record is `address` and other
/// types exist but have no records; an unlisted name does not exist.
pub fn answer(query: &Query, listed: bool, address: std::net::Ipv4Addr) -> Vec<u8> {
    let records = u16::from(listed && query.kind == A);
    let rcode = if listed { 0 } else { NXDOMAIN };
    let mut out = header(query.id, query.recursion_desired, rcode, 1, records);
    out.extend(&query.question);
    if records == 1 {
        // The name by a pointer to the question's, type A, class IN, a minute.
        out.extend([0xc0, HEADER as u8, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        out.extend(address.octets());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn query(name: &str, kind: u16) -> Vec<u8> {
        let mut out = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            out.push(label.len() as u8);
            out.extend(label.as_bytes());
        }
        out.push(0);
        out.extend(kind.to_be_bytes());
        out.extend([0, 1]);
        out
    }

    fn parsed(bytes: &[u8]) -> Query {
        match read(bytes) {
            Message::Query(q) => q,
            other => panic!("not a query: {other:?}"),
        }
    }

    #[test]
    fn a_listed_name_resolves_to_the_given_address() {
        let q = parsed(&query("PyPI.org", A));
        assert_eq!(q.name, "pypi.org");
        let reply = answer(&q, true, Ipv4Addr::LOCALHOST);
        assert_eq!(&reply[..2], &[0x12, 0x34]);
        assert_eq!(reply[3] & 0xf, 0, "NOERROR");
        assert_eq!(&reply[6..8], &[0, 1], "one answer");
        assert_eq!(&reply[reply.len() - 4..], &[127, 0, 0, 1]);
    }

    #[test]
    fn other_types_of_a_listed_name_are_empty_and_unlisted_names_do_not_exist() {
        let aaaa = answer(&parsed(&query("pypi.org", AAAA)), true, Ipv4Addr::LOCALHOST);
        assert_eq!((aaaa[3] & 0xf, aaaa[7]), (0, 0));
        let denied = answer(&parsed(&query("evil.net", A)), false, Ipv4Addr::LOCALHOST);
        assert_eq!((denied[3] & 0xf, denied[7]), (3, 0));
        // The question is echoed.
        assert!(denied.ends_with(&query("evil.net", A)[12..]));
    }

    #[test]
    fn broken_and_odd_messages_are_refused_or_dropped() {
        assert_eq!(read(&[0; 5]), Message::Drop);
        let mut response = query("a.b", A);
        response[2] |= 0x80;
        assert_eq!(read(&response), Message::Drop);
        let mut two = query("a.b", A);
        two[5] = 2;
        assert!(matches!(read(&two), Message::Refuse(r) if r[3] & 0xf == 1));
        let mut pointer = query("a.b", A);
        pointer[12] = 0xc0;
        assert!(matches!(read(&pointer), Message::Refuse(_)));
        let cut = query("a.b", A);
        assert!(matches!(read(&cut[..cut.len() - 1]), Message::Refuse(_)));
        let mut odd = query("ab", A);
        odd[13] = 0;
        assert_eq!(parsed(&odd).name, "\\000b");
    }
}
