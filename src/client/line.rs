//! A line of the driver protocol as lockbench reads it: the fields it looks at, typed
//! ([`Msg`], [`Field`]), and what a holder's tap saw ([`Tapped`]) — parsed once, as the line
//! arrives, by the reader of the process's stdout ([`super::driver`]).

use serde_json::Value;

/// One thing a holder's tap saw, as its line's `seen` lists it: `["set", key, value]` (the
/// holder's `SET … NX` set `value`; a `held` line whose token is that value does not repeat
/// it) or `["del", key, value]` (its `DEL`, sent as `GETDEL`, removed `value`; `null`: there
/// was no key).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct Tapped(
    pub(crate) TapKind,
    pub(crate) String,
    pub(crate) Option<String>,
);

/// What a tap saw: the first word of a [`Tapped`] (read without an allocation: one a cycle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TapKind {
    Set,
    Del,
    /// A word of a newer driver: not read.
    #[serde(other)]
    Other,
}

/// A line of the driver protocol as lockbench reads it: the fields it looks at, parsed once
/// as the line arrives, by the reader of the process's stdout (not a whole `Value` tree: no
/// map, no key strings — the line itself is kept for messages and for `hello`, read in full).
/// A field present with `null` is present (`Some(Field::Null)`), as `m.get(..)` saw it.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct Msg {
    #[serde(default, deserialize_with = "present")]
    pub(super) holder: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) id: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) event: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) outcome: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) token: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) error: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) kind: Option<Field>,
    #[serde(default, deserialize_with = "present")]
    pub(super) detail: Option<Field>,
    /// An event's stamp: CLOCK_MONOTONIC ns.
    #[serde(default, deserialize_with = "present")]
    pub(super) t_ns: Option<Field>,
    /// A section's reply: when the driver read its `leave`, CLOCK_MONOTONIC ns.
    #[serde(default, deserialize_with = "present")]
    pub(super) leave_ns: Option<Field>,
    /// What the holder's tap saw since its last line.
    #[serde(default)]
    pub(super) seen: Option<Vec<Tapped>>,
}

/// One field of a protocol line: a number or a text, the forms the protocol's fields take,
/// read without a `Value` (whose strings are each an allocation: a line a holder a cycle, a
/// thousand holders). Anything else is only noted (a message that shows it reads it from the
/// line again: [`Field::value`]), so that a line is small on its way to its holder. What it
/// says is what the `Value` said: [`Field::as_u64`], [`Field::as_str`] and [`Field::value`]
/// are `Value`'s.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Field {
    /// A JSON integer >= 0 that fits a `u64`.
    U64(u64),
    /// A JSON string; the protocol's words (`held`, `ok`…) without an allocation.
    Text(std::borrow::Cow<'static, str>),
    /// `null`.
    Null,
    /// Any other JSON value: a negative or fractional number, a boolean, an array, an object.
    Other,
}

/// The words of the protocol's `event`, `outcome` and `kind`: read as `'static` text, not
/// copied (they come with every reply).
const WORDS: &[&str] = &[
    "held",
    "ok",
    "lost",
    "extended",
    "timeout",
    "fail",
    "error",
    "not_owned",
    "connection",
];

impl Field {
    pub(super) fn as_u64(&self) -> Option<u64> {
        match self {
            Field::U64(n) => Some(*n),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Field::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The field `name` of `line` (where it was read) as the `Value` it is, for messages and
    /// the stamps' check; [`Field::Other`] is read from the line again.
    pub(super) fn value(&self, line: &str, name: &str) -> Value {
        match self {
            Field::U64(n) => Value::from(*n),
            Field::Text(t) => Value::from(t.as_ref()),
            Field::Null => Value::Null,
            Field::Other => serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|mut v| v.get_mut(name).map(Value::take))
                .unwrap_or_default(),
        }
    }

    fn text(t: &str) -> Field {
        match WORDS.iter().find(|w| **w == t) {
            Some(w) => Field::Text(std::borrow::Cow::Borrowed(w)),
            None => Field::Text(std::borrow::Cow::Owned(t.to_string())),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Field {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::IgnoredAny;
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Field;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, n: u64) -> Result<Field, E> {
                Ok(Field::U64(n))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Field, E> {
                Ok(Field::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Field, E> {
                Ok(Field::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Field, E> {
                Ok(Field::Other)
            }
            fn visit_str<E>(self, t: &str) -> Result<Field, E> {
                Ok(Field::text(t))
            }
            fn visit_string<E>(self, t: String) -> Result<Field, E> {
                Ok(Field::Text(std::borrow::Cow::Owned(t)))
            }
            fn visit_unit<E>(self) -> Result<Field, E> {
                Ok(Field::Null)
            }
            fn visit_none<E>(self) -> Result<Field, E> {
                Ok(Field::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
                serde::Deserialize::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Field, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Field::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Field, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Field::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A field that is there, `null` included.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Field>, D::Error> {
    <Field as serde::Deserialize>::deserialize(d).map(Some)
}

/// A field's text, where it is a string.
pub(super) fn text(v: &Option<Field>) -> Option<&str> {
    v.as_ref().and_then(Field::as_str)
}

/// A field's text, taken out of the line, where it is a string.
pub(super) fn take_text(v: &mut Option<Field>) -> Option<String> {
    match v.take() {
        Some(Field::Text(t)) => Some(t.into_owned()),
        _ => None,
    }
}

/// `line` read as one JSON object of the protocol (`None`: it is not one; a line whose object
/// repeats a field lockbench reads is not one either).
pub(super) fn parse_msg(line: &str) -> Option<Msg> {
    // A struct would also take an array; the protocol's lines are objects. (JSON's own
    // whitespace: a line led by other whitespace is refused by the parse anyway.)
    if !line
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    serde_json::from_str(line).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line is read as `Value` read it: an object only (an array is not the protocol), a
    /// field given as `null` is there, a field of another type than a string has no text,
    /// and fields lockbench does not read are ignored.
    #[test]
    fn a_line_s_fields_read_as_a_value_read_them() {
        assert!(parse_msg("[1, 2]").is_none());
        assert!(parse_msg("not json").is_none());
        assert!(parse_msg(" {\"holder\": 3").is_none());
        let m = parse_msg(r#" {"holder": 3, "id": 7, "event": null, "token": 5, "x": [1]}"#)
            .expect("an object");
        assert_eq!(m.holder.as_ref().and_then(Field::as_u64), Some(3));
        for refused in ["[1, 2]", r#"{"holder": 1, "id": 2, "id": 3}"#, "{} x"] {
            assert!(parse_msg(refused).is_none(), "{refused}");
        }
        assert_eq!(m.id.as_ref().and_then(Field::as_u64), Some(7));
        assert!(m.event.is_some(), "`null` is present");
        assert_eq!(text(&m.event), None);
        assert_eq!(text(&m.token), None, "a number is no token");
        assert!(m.outcome.is_none());
        let m = parse_msg(r#"{"id": 1, "outcome": "ok", "detail": "DEL returned 1"}"#).unwrap();
        assert_eq!(text(&m.outcome), Some("ok"));
        assert_eq!(text(&m.detail), Some("DEL returned 1"));
    }

    /// Every JSON value a field may hold reads as the `Value` it is: numbers of every kind,
    /// texts with escapes and the protocol's words, `null`, booleans, arrays and objects.
    #[test]
    fn a_field_is_the_value_it_holds() {
        for json in [
            "7",
            "18446744073709551615",
            "18446744073709551616",
            "-3",
            "1.5",
            "1e400",
            r#""held""#,
            r#""ok""#,
            r#""a \"quoted\" text\n""#,
            r#""héllo""#,
            "null",
            "true",
            "[1, \"two\", null]",
            r#"{"a": {"b": [1.5]}}"#,
        ] {
            let line = format!(r#"{{"holder": 1, "id": {json}}}"#);
            // A value `Value` refuses (a number past f64's range) makes no line either.
            let Ok(want) = serde_json::from_str::<Value>(json) else {
                assert!(parse_msg(&line).is_none(), "{json}");
                continue;
            };
            let got = parse_msg(&line).expect(json).id.expect("present");
            assert_eq!(got.value(&line, "id"), want, "{json}");
            assert_eq!(got.as_u64(), want.as_u64(), "{json}");
            assert_eq!(got.as_str(), want.as_str(), "{json}");
        }
    }

    /// What a holder's tap saw rides on its line: a set with its value, a delete with the value
    /// it removed or `null` (nothing was there).
    #[test]
    fn a_line_carries_what_the_tap_saw() {
        let m = parse_msg(
            r#"{"id":1,"outcome":"ok","seen":[["set","lock.k","t1"],["del","lock.k",null]]}"#,
        )
        .unwrap();
        assert_eq!(
            m.seen,
            Some(vec![
                Tapped(TapKind::Set, "lock.k".into(), Some("t1".into())),
                Tapped(TapKind::Del, "lock.k".into(), None),
            ])
        );
        assert_eq!(parse_msg(r#"{"id":1,"outcome":"ok"}"#).unwrap().seen, None);
    }
}
