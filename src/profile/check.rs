//! What every part of a profile's validation shares: the profile's file and text, to name the
//! line of a field at fault, and the reader of a distribution's files.

use super::ProfileError;
use crate::dist::Dist;
use std::path::Path;

/// The profile being validated: its file's name, its text (to find line numbers) and the
/// directory relative paths (empirical CSVs) are resolved against.
pub(super) struct Check<'a> {
    /// The profile file (or `command line`).
    pub(super) file: &'a str,
    /// The profile's text.
    pub(super) source: &'a str,
    /// Where relative paths start.
    pub(super) base: Option<&'a Path>,
}

impl Check<'_> {
    /// `field` is wrong: `message` says what would be valid.
    pub(super) fn err(&self, field: &str, message: String) -> ProfileError {
        ProfileError::at_field(self.file, self.source, field, message)
    }

    /// `d` with the files it names read.
    pub(super) fn load(&self, field: &str, d: Dist) -> Result<Dist, ProfileError> {
        d.load(self.base)
            .map_err(|e| self.err(field, e.to_string()))
    }
}

/// The key whose value holds byte `offset` of `source`, as a dotted path (`ttl`,
/// `retry.base`, `fault[2].kind`); `None` where the source does not parse or the offset is in
/// no value.
pub(super) fn key_at(source: &str, offset: usize) -> Option<String> {
    use toml::de::{DeTable, DeValue};
    type Item<'a> = toml::Spanned<DeValue<'a>>;
    // Tables' own spans need not cover their bodies (a `[retry]` header's does not): descend
    // into every table and array, and match the offset against the leaves' spans; an error
    // about a table as a whole (a `[[fault]]` entry refused by its checks) is at its span.
    fn find(v: &Item<'_>, offset: usize, path: String) -> Option<String> {
        match v.get_ref() {
            DeValue::Table(t) => in_table(t, offset, &path)
                .or_else(|| (!path.is_empty() && v.span().contains(&offset)).then_some(path)),
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(i, item)| find(item, offset, format!("{path}[{i}]"))),
            _ => v.span().contains(&offset).then_some(path),
        }
    }
    fn in_table(t: &DeTable<'_>, offset: usize, path: &str) -> Option<String> {
        t.iter().find_map(|(k, v)| {
            let key = match path {
                "" => k.get_ref().to_string(),
                _ => format!("{path}.{}", k.get_ref()),
            };
            find(v, offset, key)
        })
    }
    in_table(DeTable::parse(source).ok()?.get_ref(), offset, "")
}

/// The 1-based line where the key at `path` is written (`["ttl"]`, `["retry", "base"]`,
/// `["fault", "2"]` for the third `[[fault]]`), found in the TOML's own syntax tree with its
/// spans: a `base` of another table, or a comment that mentions the key, is never taken for
/// it. A path that goes deeper than the file does names the deepest part written.
pub(super) fn locate(source: &str, path: &[&str]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(source).ok()?;
    let mut table = doc.get_ref();
    let mut at = None;
    let mut rest = path;
    while let [key, tail @ ..] = rest {
        let Some((k, v)) = table.iter().find(|(k, _)| k.get_ref() == key) else {
            break;
        };
        at = Some(k.span().start);
        rest = tail;
        let mut value = v;
        // An array of tables (`[[fault]]`): the next part of the path is the entry's index.
        if let (DeValue::Array(items), [index, tail @ ..]) = (v.get_ref(), rest) {
            let Some(item) = index.parse::<usize>().ok().and_then(|i| items.get(i)) else {
                break;
            };
            at = Some(item.span().start);
            rest = tail;
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(t) => table = t,
            _ => break,
        }
    }
    at.map(|start| 1 + source[..start.min(source.len())].matches('\n').count())
}
