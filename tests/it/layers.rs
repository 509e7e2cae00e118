//! The layering that `src/lib.rs` documents is the one the imports follow. The `## Layers`
//! list in its `//!` is read here: a module may name (`crate::…`) only modules on lines below
//! its own, every module of `src/` is on the list once, and the list names no module that is
//! not there. Code inside `#[cfg(test)]` modules and comments is not counted: a test may reach
//! anywhere, and a doc link is not a dependency.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layers top to bottom, each the module names on one `N. `module`, `module` — …` line.
fn layers(lib_rs: &str) -> Vec<Vec<String>> {
    let doc: Vec<&str> = lib_rs
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .skip_while(|l| *l != "## Layers")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect();
    doc.iter()
        .filter_map(|l| {
            let (n, rest) = l.split_once(". ")?;
            n.parse::<usize>().ok()?;
            let names = rest.split(" — ").next()?;
            Some(
                names
                    .split(',')
                    .map(|m| m.trim().trim_matches('`').to_string())
                    .collect(),
            )
        })
        .collect()
}

/// `text` without comments and without the bodies of `#[cfg(test)]` items.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            // Skip the item that follows, to the brace that closes it.
            let mut depth = 0i32;
            let mut opened = false;
            for l in lines.by_ref() {
                let code = l.split("//").next().unwrap_or("");
                depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
                opened |= code.contains('{');
                if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = match line.find("//") {
            // `//` inside a string (a URL) is rare in paths of interest; cut at the first.
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The top-level modules each module names: `crate::NAME` anywhere in its code.
fn uses(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // `crate::name!` is a macro exported at the crate's root, not a module.
        if !name.is_empty() && !rest[name.len()..].starts_with('!') {
            found.push(name);
        }
    }
    found
}

/// Every `.rs` file under `dir`, with the top-level module it belongs to.
fn sources(src: &Path) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(src).unwrap();
            let first = rel.components().next()?.as_os_str().to_str()?.to_string();
            let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
            // The crate roots are not layers: lib.rs declares, main.rs is the binary.
            (module != "lib" && module != "main").then_some((module, p))
        })
        .collect()
}

/// A source file: its top-level module, its path, its code (comments and tests cut).
type Source = (String, String, String);

/// Each import against the order, as `file: module -> used (why)`, and each mismatch between
/// the list and the modules that exist.
fn violations(layers: &[Vec<String>], files: &[Source]) -> Vec<String> {
    let mut level = BTreeMap::new();
    let mut bad = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        for m in layer {
            if level.insert(m.clone(), i).is_some() {
                bad.push(format!("`{m}` is listed twice"));
            }
        }
    }
    let present: std::collections::BTreeSet<&String> = files.iter().map(|(m, _, _)| m).collect();
    for m in level.keys() {
        if !present.contains(m) {
            bad.push(format!("`{m}` is listed but there is no such module"));
        }
    }
    for (module, file, code) in files {
        let Some(&own) = level.get(module) else {
            bad.push(format!("{file}: module `{module}` is not on the list"));
            continue;
        };
        for used in uses(code) {
            if used == *module {
                continue;
            }
            match level.get(&used) {
                Some(&l) if l > own => {}
                Some(&l) => bad.push(format!(
                    "{file}: `{module}` (layer {}) uses `{used}` (layer {}), not below it",
                    own + 1,
                    l + 1
                )),
                None => bad.push(format!("{file}: uses `{used}`, which is not on the list")),
            }
        }
    }
    bad
}

fn read_tree() -> (Vec<Vec<String>>, Vec<Source>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let files = sources(&root.join("src"))
        .into_iter()
        .map(|(m, p)| {
            let text = std::fs::read_to_string(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            (m, rel, code_of(&text))
        })
        .collect();
    (layers(&lib), files)
}

/// The module path of a source file: `src/engine/worker.rs` → `["engine", "worker"]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_start_matches("src/")
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The files each file names (`crate::a::b::Item` → the file of the longest module prefix,
/// `super::x` and `self::x` from its own module), as edges between indices of `files`.
fn file_edges(files: &[Source]) -> Vec<Vec<usize>> {
    let modules: Vec<Vec<String>> = files.iter().map(|(_, f, _)| module_of(f)).collect();
    let find = |path: &[String]| {
        (1..=path.len())
            .rev()
            .find_map(|k| modules.iter().position(|m| m.as_slice() == &path[..k]))
    };
    files
        .iter()
        .enumerate()
        .map(|(i, (_, _, code))| {
            let mut out = Vec::new();
            for (prefix, base) in [
                ("crate::", Vec::new()),
                (
                    "super::",
                    modules[i][..modules[i].len().saturating_sub(1)].to_vec(),
                ),
                ("self::", modules[i].clone()),
            ] {
                let mut rest = code.as_str();
                while let Some(at) = rest.find(prefix) {
                    // `$crate::`, and `super::` inside a longer word, are not this file's paths.
                    let before = code.len() - rest.len() + at;
                    rest = &rest[at + prefix.len()..];
                    if before > 0
                        && code[..before]
                            .ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$')
                    {
                        continue;
                    }
                    let path: Vec<String> = rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .filter(|p| !p.is_empty())
                        .map(str::to_string)
                        .collect();
                    let full: Vec<String> = base.iter().cloned().chain(path).collect();
                    if let Some(j) = find(&full).filter(|&j| j != i) {
                        out.push(j);
                    }
                }
            }
            out.sort_unstable();
            out.dedup();
            out
        })
        .collect()
}

/// The cycles among files: each strongly connected set of more than one file (Tarjan).
fn file_cycles(files: &[Source]) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.edges[v] {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let edges = file_edges(files);
    let n = files.len();
    let mut t = T {
        edges: &edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    t.out
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| files[i].1.clone()).collect();
            names.sort();
            names
        })
        .collect()
}

/// No two files of `src/` use each other, directly or through others: within a module too,
/// the files form layers.
#[test]
fn no_file_is_part_of_an_import_cycle() {
    let (_, files) = read_tree();
    let cycles = file_cycles(&files);
    assert!(
        cycles.is_empty(),
        "import cycles among files of src/:\n{}",
        cycles
            .iter()
            .map(|c| c.join(" ↔ "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The cycle check finds a cycle through `super::` and `crate::` paths, and none in a chain.
#[test]
fn the_cycle_check_can_fail() {
    let file = |f: &str, code: &str| ("m".to_string(), f.to_string(), code_of(code));
    let chain = [
        file("src/m/mod.rs", "use self::a::X;"),
        file("src/m/a.rs", "use super::b::Y;"),
        file("src/m/b.rs", "fn f() {}"),
    ];
    assert!(file_cycles(&chain).is_empty());
    let mut cycle = chain.clone();
    cycle[2] = file("src/m/b.rs", "fn f() { crate::m::a::g() }");
    assert_eq!(file_cycles(&cycle), [vec!["src/m/a.rs", "src/m/b.rs"]]);
}

/// The imports of `src/` follow the order `src/lib.rs` writes, and the list is complete.
#[test]
fn imports_follow_the_documented_layers() {
    let (layers, files) = read_tree();
    assert!(
        layers.len() >= 5,
        "src/lib.rs has no `## Layers` list of numbered lines"
    );
    let bad = violations(&layers, &files);
    assert!(
        bad.is_empty(),
        "{} import(s) against the layers of src/lib.rs:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The check catches what it is for: an upward import, an import within one layer, a module
/// missing from the list, a test module's import ignored.
#[test]
fn the_check_can_fail() {
    let lib = "//! ## Layers\n//!\n//! 1. `top` — uses below\n//! 2. `mid`, `side` — one layer\n//! 3. `low` — the bottom\n//!\n//! ## Other\n";
    let layers = layers(lib);
    assert_eq!(layers, [vec!["top"], vec!["mid", "side"], vec!["low"]]);
    let file = |m: &str, code: &str| (m.to_string(), format!("src/{m}.rs"), code_of(code));
    let good = [
        file("top", "use crate::mid::X; use crate::low::Y;"),
        file(
            "mid",
            "use crate::low::Y;\n#[cfg(test)]\nmod tests {\n    use crate::top::Z;\n}\n",
        ),
        file("side", "// see crate::top\nfn f() { crate::low::g() }"),
        file("low", ""),
    ];
    assert_eq!(violations(&layers, &good), Vec::<String>::new());
    let mut upward = good.clone();
    upward[3] = file("low", "use crate::top::X;");
    assert_eq!(violations(&layers, &upward).len(), 1);
    let mut sideways = good.clone();
    sideways[1] = file("mid", "use crate::side::X;");
    assert_eq!(violations(&layers, &sideways).len(), 1);
    let mut unlisted = good.to_vec();
    unlisted.push(file("new", ""));
    assert_eq!(violations(&layers, &unlisted).len(), 1);
}
