//! The run's key names, written per command without the formatting machinery.

/// The run's key names: a prefix and the key's number. A name is needed per command (the
/// simulator sends tens of millions) and writing it into a reused string is cheaper than
/// reading it from a table of 100,000 names, two cache misses away.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyNames {
    prefix: String,
    n: usize,
    tagged: bool,
}

impl KeyNames {
    /// Keys `0..n`, named `{prefix}{k}`.
    pub(crate) fn new(prefix: String, n: usize) -> Self {
        Self {
            prefix,
            n,
            tagged: false,
        }
    }

    /// The same keys with the number as a hash tag, `{prefix}{{k}}` (`…:{17}`): on a Redis
    /// Cluster, keys spread over the slots by number, and a lock's companions
    /// (`…:{17}:fence`) share its slot.
    pub(crate) fn tagged(mut self, on: bool) -> Self {
        self.tagged = on;
        self
    }

    /// The prefix every name starts with.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Writes the name of `key` into `out` (cleared first).
    pub(crate) fn write(&self, key: usize, out: &mut String) {
        out.clear();
        out.push_str(&self.prefix);
        if self.tagged {
            out.push('{');
            push_decimal(out, key as u64);
            out.push('}');
        } else {
            push_decimal(out, key as u64);
        }
    }

    /// The name of `key`.
    pub(crate) fn name(&self, key: usize) -> String {
        let mut out = String::with_capacity(self.prefix.len() + 8);
        self.write(key, &mut out);
        out
    }

    /// The names in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.n).map(|k| self.name(k))
    }
}

/// Appends `n` in decimal, as `{n}` writes it (without the formatting machinery: this runs for
/// every command the simulator sends).
pub(crate) fn push_decimal(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// Appends `n` as 16 lower-case hexadecimal digits, as `{n:016x}` writes it.
pub(crate) fn push_hex16(out: &mut String, n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend(
        (0..16)
            .rev()
            .map(|i| char::from(HEX[(n >> (4 * i)) as usize & 15])),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written numbers are what `format!` writes.
    #[test]
    fn numbers_are_written_as_format_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut s = String::from("x");
            push_decimal(&mut s, n);
            push_hex16(&mut s, n);
            assert_eq!(s, format!("x{n}{n:016x}"));
        }
        let names = KeyNames::new("p:".into(), 3);
        assert_eq!(names.iter().collect::<Vec<_>>(), ["p:0", "p:1", "p:2"]);
    }
}
