//! A JSON Schema (draft 2020-12) validator for the keywords `schema/summary.schema.json` uses,
//! and no others: a keyword it does not know fails the check rather than pass unchecked, so the
//! schema cannot grow a rule the tests silently skip. In place of the `jsonschema` crate, whose
//! dependencies (two regex engines, big integers, URL parsing) were a sixth of the test build's
//! compile on the 2-core CI machines, for the dozen keywords one committed schema needs.

use serde_json::Value;

/// Every way `instance` breaks `schema`, one line each, naming where (`/variants/0/overlap_ms`).
pub fn errors(schema: &Value, instance: &Value) -> Vec<String> {
    let mut out = Vec::new();
    Check { root: schema }.value(schema, instance, "", &mut out);
    out
}

struct Check<'a> {
    root: &'a Value,
}

/// Annotations: they describe, they never reject.
const ANNOTATIONS: [&str; 5] = ["$schema", "$id", "title", "description", "$defs"];

impl Check<'_> {
    fn value(&self, schema: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return out.push(format!("{at}: no value is allowed here")),
            Value::Object(m) => m,
            other => panic!("{at}: a schema is an object or a boolean, not {other}"),
        };
        for (key, rule) in schema {
            match key.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$ref" => self.value(self.target(rule), v, at, out),
                "type" => {
                    let names: Vec<&str> = match rule {
                        Value::String(s) => vec![s.as_str()],
                        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                        _ => panic!("{at}: `type` {rule}"),
                    };
                    if !names.iter().any(|n| is_type(v, n)) {
                        out.push(format!("{at}: {v} is not of type {rule}"));
                    }
                }
                "enum" => {
                    if !rule.as_array().is_some_and(|a| a.contains(v)) {
                        out.push(format!("{at}: {v} is not one of {rule}"));
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" => {
                    let (Some(x), Some(bound)) = (v.as_f64(), rule.as_f64()) else {
                        continue; // applies to numbers only
                    };
                    let ok = match key.as_str() {
                        "minimum" => x >= bound,
                        "maximum" => x <= bound,
                        _ => x > bound,
                    };
                    if !ok {
                        out.push(format!("{at}: {v} breaks {key} {rule}"));
                    }
                }
                "pattern" => {
                    if let Some(s) = v.as_str()
                        && !Pattern::new(rule.as_str().expect("a pattern is a string")).matches(s)
                    {
                        out.push(format!("{at}: {v} does not match {rule}"));
                    }
                }
                "required" => {
                    if let Some(m) = v.as_object() {
                        for name in rule.as_array().expect("`required` is an array") {
                            let name = name.as_str().expect("a required name is a string");
                            if !m.contains_key(name) {
                                out.push(format!("{at}: `{name}` is required"));
                            }
                        }
                    }
                }
                "properties" => {
                    if let Some(m) = v.as_object() {
                        for (name, sub) in rule.as_object().expect("`properties` is an object") {
                            if let Some(x) = m.get(name) {
                                self.value(sub, x, &format!("{at}/{name}"), out);
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Some(m) = v.as_object() {
                        let declared = schema.get("properties").and_then(Value::as_object);
                        for (name, x) in m {
                            if !declared.is_some_and(|d| d.contains_key(name)) {
                                self.value(rule, x, &format!("{at}/{name}"), out);
                            }
                        }
                    }
                }
                "items" => {
                    if let Some(a) = v.as_array() {
                        for (i, x) in a.iter().enumerate() {
                            self.value(rule, x, &format!("{at}/{i}"), out);
                        }
                    }
                }
                "minItems" => {
                    let min = rule.as_u64().expect("`minItems` is a count") as usize;
                    if v.as_array().is_some_and(|a| a.len() < min) {
                        out.push(format!("{at}: fewer than {min} items"));
                    }
                }
                "anyOf" | "oneOf" => {
                    let branches = rule.as_array().expect("`anyOf`/`oneOf` is an array");
                    let passed = branches
                        .iter()
                        .filter(|b| {
                            let mut e = Vec::new();
                            self.value(b, v, at, &mut e);
                            e.is_empty()
                        })
                        .count();
                    let ok = if key == "anyOf" {
                        passed > 0
                    } else {
                        passed == 1
                    };
                    if !ok {
                        out.push(format!("{at}: {v} passes {passed} of `{key}`'s schemas"));
                    }
                }
                other => panic!(
                    "{at}: keyword `{other}` is not known to tests/it/common/schema.rs: \
                     teach it there, or the schema's rule goes unchecked"
                ),
            }
        }
    }

    fn target(&self, reference: &Value) -> &Value {
        let r = reference.as_str().expect("a $ref is a string");
        let pointer = r
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("only local $refs are known here, not {r}"));
        self.root
            .pointer(pointer)
            .unwrap_or_else(|| panic!("$ref {r} names nothing in the schema"))
    }
}

fn is_type(v: &Value, name: &str) -> bool {
    match name {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "number" => v.is_number(),
        // JSON Schema: a number with no fractional part, 1.0 included.
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|x| x.fract() == 0.0),
        other => panic!("unknown type `{other}`"),
    }
}

/// The regular expressions a schema's `pattern` uses here: `^`, `$`, literals, `\` escapes,
/// classes of characters and ranges (`[A-Za-z0-9._-]`), and `?`, `*`, `+`, `{n}`, `{m,n}`.
/// Unanchored ends match anywhere, as JSON Schema says.
struct Pattern {
    atoms: Vec<(Atom, usize, usize)>,
    start: bool,
    end: bool,
}

enum Atom {
    Char(char),
    Class(Vec<(char, char)>),
}

impl Atom {
    fn accepts(&self, c: char) -> bool {
        match self {
            Atom::Char(x) => *x == c,
            Atom::Class(ranges) => ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)),
        }
    }
}

impl Pattern {
    fn new(text: &str) -> Pattern {
        let mut chars: Vec<char> = text.chars().collect();
        let start = chars.first() == Some(&'^');
        if start {
            chars.remove(0);
        }
        let end = chars.last() == Some(&'$') && chars.len() >= 2 && chars[chars.len() - 2] != '\\';
        if end {
            chars.pop();
        }
        let mut atoms = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let atom = match chars[i] {
                '\\' => {
                    i += 1;
                    Atom::Char(chars[i])
                }
                '[' => {
                    let mut ranges = Vec::new();
                    i += 1;
                    while chars[i] != ']' {
                        let lo = chars[i];
                        if chars[i + 1] == '-' && chars[i + 2] != ']' {
                            ranges.push((lo, chars[i + 2]));
                            i += 3;
                        } else {
                            ranges.push((lo, lo));
                            i += 1;
                        }
                    }
                    Atom::Class(ranges)
                }
                c @ ('(' | ')' | '|' | '.' | '^' | '$') => {
                    panic!("pattern `{text}`: `{c}` is not known to tests/it/common/schema.rs")
                }
                c => Atom::Char(c),
            };
            i += 1;
            let (min, max) = match chars.get(i) {
                Some('?') => (0, 1),
                Some('*') => (0, usize::MAX),
                Some('+') => (1, usize::MAX),
                Some('{') => {
                    let close = i + chars[i..].iter().position(|&c| c == '}').unwrap();
                    let inner: String = chars[i + 1..close].iter().collect();
                    i = close;
                    match inner.split_once(',') {
                        Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                        None => (inner.parse().unwrap(), inner.parse().unwrap()),
                    }
                }
                _ => {
                    atoms.push((atom, 1, 1));
                    continue;
                }
            };
            i += 1;
            atoms.push((atom, min, max));
        }
        Pattern { atoms, start, end }
    }

    fn matches(&self, s: &str) -> bool {
        let chars: Vec<char> = s.chars().collect();
        let starts = if self.start { 0..=0 } else { 0..=chars.len() };
        starts.into_iter().any(|from| self.from(0, &chars[from..]))
    }

    /// Whether atoms `k..` match a prefix of `rest` (all of it when anchored at the end).
    fn from(&self, k: usize, rest: &[char]) -> bool {
        let Some((atom, min, max)) = self.atoms.get(k) else {
            return !self.end || rest.is_empty();
        };
        let most = rest
            .iter()
            .take(*max)
            .take_while(|&&c| atom.accepts(c))
            .count();
        (*min..=most).rev().any(|n| self.from(k + 1, &rest[n..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns_match_and_refuse() {
        let id = Pattern::new("^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$");
        assert!(id.matches("20261207T010203Z-0a1b2c3d"));
        assert!(!id.matches("20261207T010203Z-0a1b2c3"));
        assert!(!id.matches("x20261207T010203Z-0a1b2c3d"));
        let name = Pattern::new("^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$");
        assert!(name.matches("agent-1.b_c"));
        assert!(!name.matches("-agent"));
        assert!(!name.matches(&"a".repeat(65)));
        assert!(Pattern::new("b+c").matches("aabbbcd"));
    }

    #[test]
    fn each_keyword_can_refuse() {
        let schema = json!({
            "$defs": {"q": {"type": "integer", "minimum": 0, "maximum": 9}},
            "type": "object", "additionalProperties": false, "required": ["a"],
            "properties": {
                "a": {"$ref": "#/$defs/q"},
                "b": {"type": "array", "minItems": 1, "items": {"enum": ["x", "y"]}},
                "c": {"oneOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}]},
            }
        });
        assert!(errors(&schema, &json!({"a": 3, "b": ["x"], "c": "s"})).is_empty());
        for bad in [
            json!({}),
            json!({"a": 10}),
            json!({"a": 1.5}),
            json!({"a": 1, "z": 0}),
            json!({"a": 1, "b": []}),
            json!({"a": 1, "b": ["q"]}),
            json!({"a": 1, "c": 0}),
            json!({"a": 1, "c": true}),
        ] {
            assert_eq!(errors(&schema, &bad).len(), 1, "{bad}");
        }
    }

    #[test]
    #[should_panic(expected = "keyword `maxItems` is not known")]
    fn an_unknown_keyword_is_not_passed_over() {
        errors(&json!({"maxItems": 1}), &json!([]));
    }
}
