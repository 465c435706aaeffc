//! Hand-written JSON for the two answers sent on every scheduling cycle
//! (`/filter`'s `ExtenderFilterResult`, `/prioritize`'s `HostPriorityList`):
//! straight into one buffer, node names and raw node objects copied from the
//! request, no intermediate maps or per-node strings. The bytes are those
//! serde_json writes for the same values (keys in Go's declaration order,
//! strings escaped the same way, map keys sorted as Go's encoding/json sorts
//! them). Only the failed nodes are sorted, as references.

/// Appends `s` as a JSON string, escaped as serde_json does.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_escaped(out, s);
    out.push(b'"');
}

/// Appends the parts of one string (e.g. reasons joined by ", ") as one JSON string.
pub fn push_joined<'a>(out: &mut Vec<u8>, parts: impl IntoIterator<Item = &'a str>, sep: &str) {
    out.push(b'"');
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            push_escaped(out, sep);
        }
        push_escaped(out, p);
    }
    out.push(b'"');
}

/// Appends `s` escaped, without quotes.
fn push_escaped(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let needs_escape = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let bytes = s.as_bytes();
    // Names and messages almost never need escaping: one scan, one copy.
    // The scan has no early exit, so it runs many bytes per instruction.
    if !bytes.iter().fold(false, |any, &b| any | needs_escape(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !needs_escape(b) {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends an integer.
pub fn push_int(out: &mut Vec<u8>, n: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let negative = n < 0;
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends a string taken from a request: one that was borrowed from the
/// body held no escape there, so (valid JSON having no raw quote, backslash
/// or control character inside a string) it is copied without a scan.
// The Cow is the point: whether the string was borrowed says it needs no scan.
#[allow(clippy::ptr_arg)]
pub fn push_request_str(out: &mut Vec<u8>, s: &std::borrow::Cow<'_, str>) {
    match s {
        std::borrow::Cow::Borrowed(s) => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        std::borrow::Cow::Owned(s) => push_str(out, s),
    }
}

/// Writes a `HostPriorityList`: `[{"Host":…,"Score":…},…]`.
pub fn priorities<'a, 'b: 'a>(
    out: &mut Vec<u8>,
    list: impl IntoIterator<Item = (&'a std::borrow::Cow<'b, str>, i64)>,
) {
    out.push(b'[');
    for (i, (host, score)) in list.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"Host\":");
        push_request_str(out, host);
        out.extend_from_slice(b",\"Score\":");
        push_int(out, score);
        out.push(b'}');
    }
    out.push(b']');
}

/// One requested node of a `/filter` answer.
pub trait FilteredNode {
    /// The name, as requested.
    fn name(&self) -> &str;
    /// Appends the name as a JSON string.
    fn push_name(&self, out: &mut Vec<u8>) {
        push_str(out, self.name());
    }
    /// The raw node object (full-node requests only).
    fn raw(&self) -> Option<&str>;
    /// Appends the failure message as a JSON string (failed nodes only).
    fn push_message(&self, out: &mut Vec<u8>);
}

/// How the nodes came in, which decides how the passed ones are listed.
#[derive(Debug, Clone, Copy)]
pub enum Listing<'a> {
    /// `NodeNames`: passed names in `NodeNames`, `Nodes` null.
    Names,
    /// Full `Nodes`: passed raw objects under the request's list metadata.
    Full {
        /// The raw `metadata` of the request's list (`None`: null).
        metadata: Option<&'a str>,
    },
}

/// Writes an `ExtenderFilterResult` with an empty `Error`: `passed` in
/// request order, `failed` (`FailedNodes`, preemption may help) and
/// `unresolvable` (`FailedAndUnresolvableNodes`) sorted here by name.
pub fn filter_result<N: FilteredNode>(
    out: &mut Vec<u8>,
    passed: &[N],
    failed: &[N],
    unresolvable: &[N],
    listing: Listing<'_>,
) {
    out.extend_from_slice(b"{\"Nodes\":");
    match listing {
        Listing::Names => {
            out.extend_from_slice(b"null,\"NodeNames\":[");
            for (i, n) in passed.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                n.push_name(out);
            }
            out.extend_from_slice(b"]");
        }
        Listing::Full { metadata } => {
            out.extend_from_slice(b"{\"metadata\":");
            out.extend_from_slice(metadata.unwrap_or("null").as_bytes());
            out.extend_from_slice(b",\"items\":[");
            for (i, raw) in passed.iter().filter_map(|n| n.raw()).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(raw.as_bytes());
            }
            out.extend_from_slice(b"]},\"NodeNames\":null");
        }
    }
    for (key, nodes) in [
        (&b",\"FailedNodes\":{"[..], failed),
        (b"},\"FailedAndUnresolvableNodes\":{", unresolvable),
    ] {
        out.extend_from_slice(key);
        for (i, n) in by_name(nodes).into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            n.push_name(out);
            out.push(b':');
            n.push_message(out);
        }
    }
    out.extend_from_slice(b"},\"Error\":\"\"}");
}

/// `nodes` in name order, as Go sorts map keys (byte order). Node names
/// share long prefixes (`ip-10-0-…`), so comparing them byte by byte spends
/// most of its time on the prefix: each node is keyed once by the 8 bytes
/// after the prefix all of them share, as one integer, and the sort compares
/// those keys, held next to each other, reading whole names only when two
/// keys are equal. Comparing through the nodes instead chases a few pointers
/// per comparison, most of them cache misses at thousands of nodes.
fn by_name<N: FilteredNode>(nodes: &[N]) -> Vec<&N> {
    let Some((first, rest)) = nodes.split_first() else {
        return Vec::new();
    };
    let first = first.name().as_bytes();
    let shared = rest.iter().fold(first.len(), |len, n| {
        let name = n.name().as_bytes();
        first[..len]
            .iter()
            .zip(name)
            .take_while(|(a, b)| a == b)
            .count()
    });
    let mut keyed: Vec<(u64, &N)> = nodes
        .iter()
        .map(|n| (next_bytes(n.name(), shared), n))
        .collect();
    keyed.sort_unstable_by(|(ka, a), (kb, b)| ka.cmp(kb).then_with(|| a.name().cmp(b.name())));
    keyed.into_iter().map(|(_, n)| n).collect()
}

/// The 8 bytes of `s` from `at`, zero-padded, as a big-endian integer: its
/// order is the byte order of those bytes (a shorter string pads with zeros,
/// and an equal integer leaves the decision to the whole strings).
fn next_bytes(s: &str, at: usize) -> u64 {
    let tail = s.as_bytes().get(at..).unwrap_or_default();
    // A fixed-size read when 8 bytes are there: a copy of a variable length
    // is a `memcpy` call per comparison.
    if let Some(word) = tail.first_chunk::<8>() {
        return u64::from_be_bytes(*word);
    }
    let mut word = [0u8; 8];
    for (w, b) in word.iter_mut().zip(tail) {
        *w = *b;
    }
    u64::from_be_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ExtenderFilterResult, HostPriority};

    #[test]
    fn strings_are_escaped_as_serde_json_does() {
        for s in [
            "plain",
            "q\"b\\s",
            "nl\n\r\t\u{8}\u{c}",
            "ctl\u{1}\u{1f}",
            "ünï ☃ <&>",
            "",
        ] {
            let mut out = Vec::new();
            push_str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
        let mut out = Vec::new();
        push_joined(&mut out, ["a\"", "b"], ", ");
        assert_eq!(out, br#""a\", b""#);
    }

    #[test]
    fn integers_and_priorities_match_serde_json() {
        for n in [0, 7, 10, -3, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            push_int(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
        let list = vec![
            HostPriority {
                host: "a\"1".into(),
                score: 10,
            },
            HostPriority {
                host: "b".into(),
                score: 0,
            },
        ];
        // An escaped (owned) name is escaped again; a borrowed one is copied.
        let hosts: Vec<std::borrow::Cow<str>> = vec!["a\"1".to_string().into(), "b".into()];
        let mut out = Vec::new();
        priorities(&mut out, hosts.iter().zip([10, 0]));
        assert_eq!(out, serde_json::to_vec(&list).unwrap());
        let mut out = Vec::new();
        priorities(&mut out, std::iter::empty());
        assert_eq!(out, b"[]");
    }

    struct Named(String);
    impl FilteredNode for Named {
        fn name(&self) -> &str {
            &self.0
        }
        fn raw(&self) -> Option<&str> {
            None
        }
        fn push_message(&self, _: &mut Vec<u8>) {}
    }

    #[test]
    fn names_sort_in_byte_order_whatever_they_share() {
        let cases: [&[&str]; 5] = [
            &[
                "ip-10-0-19-136.us-east-1.compute.internal",
                "ip-10-0-1-36.us-east-1.compute.internal",
                "ip-10-0-1-3.us-east-1.compute.internal",
                "ip-10-0-19-13.us-east-1.compute.internal",
                "ip-10-0-1",
                "ip-10-0-1\u{0}",
                "ip-10-0-1-36.us-east-1.compute.internal",
                "ip-10-0-19-136.us-east-1.compute.internalx",
            ],
            &["b", "a", "", "ab", "aa", "a\u{0}", "ü", "z"],
            &["same", "same"],
            &["one"],
            &[],
        ];
        for names in cases {
            let nodes: Vec<Named> = names.iter().map(|n| Named(n.to_string())).collect();
            let mut expected: Vec<&str> = names.to_vec();
            expected.sort_unstable();
            let got: Vec<&str> = by_name(&nodes).iter().map(|n| n.0.as_str()).collect();
            assert_eq!(got, expected);
        }
    }

    struct N(&'static str, Option<&'static str>);
    impl FilteredNode for N {
        fn name(&self) -> &str {
            self.0
        }
        fn raw(&self) -> Option<&str> {
            self.1
        }
        fn push_message(&self, out: &mut Vec<u8>) {
            push_str(out, "no \"hw\"");
        }
    }

    #[test]
    fn filter_results_match_serde_json_of_the_same_answer() {
        let passed = [
            N("a", Some(r#"{"metadata":{"name":"a"}}"#)),
            N("d", Some(r#"{"metadata":{"name":"d"}}"#)),
        ];
        let failed = [N("b", None)];
        let unresolvable = [N("c2", None), N("c1", None)];
        let mut out = Vec::new();
        filter_result(&mut out, &passed, &failed, &unresolvable, Listing::Names);
        let expected = ExtenderFilterResult {
            nodes: None,
            node_names: Some(vec!["a".into(), "d".into()]),
            failed_nodes: Some([("b".to_string(), "no \"hw\"".to_string())].into()),
            failed_and_unresolvable_nodes: Some(
                [("c2", "no \"hw\""), ("c1", "no \"hw\"")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            ),
            error: String::new(),
        };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
        let mut out = Vec::new();
        filter_result(
            &mut out,
            &passed,
            &failed,
            &unresolvable,
            Listing::Full {
                metadata: Some("{}"),
            },
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(
                r#"{"Nodes":{"metadata":{},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"d"}}]},"NodeNames":null,"FailedNodes":{"b":"#
            ),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["FailedAndUnresolvableNodes"]["c1"], "no \"hw\"");
    }
}
