//! Sequence lengths of the fixed-seq-len scenario: InferenceX's names for them (`1k1k`, `8k1k`,
//! `<isl>_<osl>`: its buckets and `exp-name`s), the plan's display (`1k/1k`) and a serving
//! recipe's `seq-len` selector, which is written as InferenceX names it.

/// An input / output sequence length pair (tokens), as a fixed-seq-len block declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqLen {
    pub isl: u32,
    pub osl: u32,
}

impl SeqLen {
    pub fn new(isl: u32, osl: u32) -> SeqLen {
        SeqLen { isl, osl }
    }

    /// InferenceX's name: `1k1k`, `8k1k`, else `<isl>_<osl>` (its matrix buckets, `exp-name`s and
    /// this project's point ids).
    pub fn name(self) -> String {
        match (self.isl, self.osl) {
            (1024, 1024) => "1k1k".into(),
            (8192, 1024) => "8k1k".into(),
            (isl, osl) => format!("{isl}_{osl}"),
        }
    }

    /// For people: `1k/1k`, `8k/1k` in units of 1,024 tokens, else `<isl>/<osl>`.
    pub fn label(self) -> String {
        let k = |n: u32| if n.is_multiple_of(1024) { format!("{}k", n / 1024) } else { n.to_string() };
        format!("{}/{}", k(self.isl), k(self.osl))
    }

    /// A `seq-len` selector: InferenceX's names (`1k1k`, `8k1k`, `1024_8192`) and, for any pair in
    /// units of 1,024 tokens, `<a>k<b>k` (`1k8k`). `None` for anything else.
    pub fn parse(s: &str) -> Option<SeqLen> {
        let num = |t: &str| t.parse::<u32>().ok().filter(|&n| n > 0 && t.bytes().all(|b| b.is_ascii_digit()));
        if let Some((i, o)) = s.split_once('_') {
            return Some(SeqLen::new(num(i)?, num(o)?));
        }
        let (i, rest) = s.split_once('k')?;
        let o = rest.strip_suffix('k')?;
        let kib = |t: &str| num(t)?.checked_mul(1024);
        Some(SeqLen::new(kib(i)?, kib(o)?))
    }
}

impl std::fmt::Display for SeqLen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::SeqLen;

    #[test]
    fn names_labels_and_selectors_agree() {
        let (k1, k8) = (SeqLen::new(1024, 1024), SeqLen::new(8192, 1024));
        assert_eq!((k1.name(), k8.name(), SeqLen::new(1024, 8192).name()), ("1k1k".into(), "8k1k".into(), "1024_8192".into()));
        assert_eq!((k1.label(), k8.label(), SeqLen::new(1000, 1024).label()), ("1k/1k".into(), "8k/1k".into(), "1000/1k".into()));
        for (text, want) in
            [("1k1k", k1), ("8k1k", k8), ("1024_1024", k1), ("1k8k", SeqLen::new(1024, 8192)), ("1000_200", SeqLen::new(1000, 200))]
        {
            assert_eq!(SeqLen::parse(text), Some(want), "{text}");
        }
        for bad in ["", "1k", "1k/1k", "8k1", "k1k", "0_1024", "1024_", "+1_2", "1k1kk", "99999999k1k", "1024x1024"] {
            assert_eq!(SeqLen::parse(bad), None, "{bad}");
        }
        // Every name parses back to its pair.
        for s in [k1, k8, SeqLen::new(1024, 8192), SeqLen::new(3000, 700)] {
            assert_eq!(SeqLen::parse(&s.name()), Some(s));
        }
    }
}
