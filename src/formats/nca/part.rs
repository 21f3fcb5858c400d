//! Index selections: a partition's `part` and the index runs of a read.
//!
//! `part` says which indices of the sub-array make the partition's data,
//! one selection per sub-array dimension, written as in the seed:
//!
//! ```text
//! "[(2, 6, 1), [1, 3, 4, 7], (0, 12, 2)]"
//!   (start, stop, step)  Python range(start, stop, step): stop exclusive,
//!                        step may be negative; `None` for a default as in
//!                        a slice (start 0 / stop at the end, or the
//!                        reverse for a negative step; step 1)
//!   [i, j, ...]          these indices, in this order (repeats allowed)
//! ```
//!
//! A selection resolves, against the sub-array's extent, into a [`Seq`]:
//! an arithmetic progression or an explicit list of sub-array indices.
//! Reads then take a run of consecutive positions of that sequence
//! ([`Seq::slice`]), forwards or backwards (a dimension whose direction
//! differs from the master's), which is again a progression (a range with
//! a step, possibly negative) or a list. The copy code turns each
//! dimension's sequence into byte offsets, so steps, lists and reversal
//! cost nothing special.

use std::fmt;

/// One dimension's selection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sel {
    /// `(start, stop, step)`, `None` for slice defaults.
    Range {
        start: Option<i64>,
        stop: Option<i64>,
        step: Option<i64>,
    },
    List(Vec<u64>),
}

/// Sub-array indices in the order the partition's data array uses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seq {
    /// `first, first + step, ...` (`len` values; `step` may be negative).
    Prog {
        first: u64,
        step: i64,
        len: u64,
    },
    List(Vec<u64>),
}

impl Seq {
    /// The whole extent `0..n`.
    pub fn whole(n: u64) -> Seq {
        Seq::Prog {
            first: 0,
            step: 1,
            len: n,
        }
    }

    pub fn len(&self) -> u64 {
        match self {
            Seq::Prog { len, .. } => *len,
            Seq::List(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value at position `j` (`j < len`).
    pub fn get(&self, j: u64) -> u64 {
        match self {
            Seq::Prog { first, step, .. } => (*first as i128 + *step as i128 * j as i128) as u64,
            Seq::List(v) => v[j as usize],
        }
    }

    /// Positions `from .. from + count` (inside `0..len`), backwards when
    /// `reversed`.
    pub fn slice(&self, from: u64, count: u64, reversed: bool) -> Seq {
        debug_assert!(from + count <= self.len());
        match self {
            Seq::Prog { step, .. } if count > 0 => {
                let (first_pos, step) = if reversed {
                    (from + count - 1, -step)
                } else {
                    (from, *step)
                };
                Seq::Prog {
                    first: self.get(first_pos),
                    step,
                    len: count,
                }
            }
            Seq::Prog { .. } => Seq::Prog {
                first: 0,
                step: 1,
                len: 0,
            },
            Seq::List(v) => {
                let part = &v[from as usize..(from + count) as usize];
                Seq::List(if reversed {
                    part.iter().rev().copied().collect()
                } else {
                    part.to_vec()
                })
            }
        }
    }

    /// Smallest and largest value (the sequence must not be empty).
    pub fn bounds(&self) -> (u64, u64) {
        match self {
            Seq::Prog { first, len, .. } => {
                let last = self.get(len - 1);
                (*first.min(&last), *first.max(&last))
            }
            Seq::List(v) => (
                *v.iter().min().expect("non-empty"),
                *v.iter().max().expect("non-empty"),
            ),
        }
    }

    /// Whether this is `first, first + 1, ...`: a plain contiguous range.
    pub fn is_ascending_run(&self) -> bool {
        match self {
            Seq::Prog { step, len, .. } => *step == 1 || *len <= 1,
            Seq::List(v) => v.windows(2).all(|w| w[1] == w[0] + 1),
        }
    }
}

impl Sel {
    /// The sub-array indices this selects from an extent of `n`, or why it
    /// cannot (an index outside `0..n`, a zero step, an empty selection).
    pub fn resolve(&self, n: u64) -> Result<Seq, String> {
        let seq = match self {
            Sel::List(v) => {
                if let Some(bad) = v.iter().find(|&&i| i >= n) {
                    return Err(format!("index {bad} is outside 0..{n}"));
                }
                Seq::List(v.clone())
            }
            &Sel::Range { start, stop, step } => {
                let step = step.unwrap_or(1);
                if step == 0 {
                    return Err("a step of 0".into());
                }
                let n = i64::try_from(n).map_err(|_| "extent too large".to_string())?;
                let start = start.unwrap_or(if step > 0 { 0 } else { n - 1 });
                let stop = stop.unwrap_or(if step > 0 { n } else { -1 });
                if start < 0 {
                    return Err(format!("start {start} is negative"));
                }
                let (start128, stop128, step128) = (start as i128, stop as i128, step as i128);
                let len = if step > 0 {
                    (stop128 - start128 + step128 - 1).div_euclid(step128)
                } else {
                    (start128 - stop128 - step128 - 1).div_euclid(-step128)
                }
                .max(0);
                let len = len as u64;
                let seq = Seq::Prog {
                    first: start as u64,
                    step,
                    len,
                };
                if len > 0 && seq.bounds().1 >= n as u64 {
                    return Err(format!(
                        "range({start}, {stop}, {step}) reaches index {}, outside 0..{n}",
                        seq.bounds().1
                    ));
                }
                seq
            }
        };
        if seq.is_empty() {
            return Err("selects nothing".into());
        }
        Ok(seq)
    }
}

impl fmt::Display for Sel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = |x: &Option<i64>| x.map_or("None".to_string(), |v| v.to_string());
        match self {
            Sel::Range { start, stop, step } => {
                write!(f, "({}, {}, {})", o(start), o(stop), o(step))
            }
            Sel::List(v) => write!(f, "{v:?}"),
        }
    }
}

/// Parse a `part` string (see the module doc).
pub fn parse(s: &str) -> Result<Vec<Sel>, String> {
    let mut p = Parser {
        s: s.as_bytes(),
        i: 0,
    };
    p.expect(b'[')?;
    let mut out = Vec::new();
    if p.peek() == Some(b']') {
        p.i += 1;
    } else {
        loop {
            out.push(p.item()?);
            match p.next() {
                Some(b',') => continue,
                Some(b']') => break,
                _ => return Err(p.unexpected("',' or ']'")),
            }
        }
    }
    if p.peek().is_some() {
        return Err(p.unexpected("the end"));
    }
    Ok(out)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.i += usize::from(c.is_some());
        c
    }

    fn unexpected(&self, want: &str) -> String {
        match self.s.get(self.i.saturating_sub(1)) {
            Some(_) if self.i <= self.s.len() => format!(
                "expected {want} at character {} of {:?}",
                self.i,
                String::from_utf8_lossy(self.s)
            ),
            _ => format!("expected {want}"),
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.next() == Some(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", c as char)))
        }
    }

    /// An integer, or `None` (the word) when `allow_none`.
    fn int(&mut self, allow_none: bool) -> Result<Option<i64>, String> {
        self.skip_ws();
        if allow_none && self.s[self.i..].starts_with(b"None") {
            self.i += 4;
            return Ok(None);
        }
        let start = self.i;
        if matches!(self.s.get(self.i), Some(b'-' | b'+')) {
            self.i += 1;
        }
        while matches!(self.s.get(self.i), Some(c) if c.is_ascii_digit()) {
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        text.parse::<i64>()
            .map(Some)
            .map_err(|_| self.unexpected("an integer"))
    }

    fn item(&mut self) -> Result<Sel, String> {
        match self.next() {
            Some(b'(') => {
                let start = self.int(true)?;
                self.expect(b',')?;
                let stop = self.int(true)?;
                let step = match self.next() {
                    Some(b',') => {
                        let step = self.int(true)?;
                        self.expect(b')')?;
                        step
                    }
                    Some(b')') => None,
                    _ => return Err(self.unexpected("',' or ')'")),
                };
                Ok(Sel::Range { start, stop, step })
            }
            Some(b'[') => {
                let mut v = Vec::new();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Sel::List(v));
                }
                loop {
                    let x = self.int(false)?.unwrap_or(-1);
                    let x = u64::try_from(x).map_err(|_| format!("negative index {x}"))?;
                    v.push(x);
                    match self.next() {
                        Some(b',') => continue,
                        Some(b']') => break,
                        _ => return Err(self.unexpected("',' or ']'")),
                    }
                }
                Ok(Sel::List(v))
            }
            _ => Err(self.unexpected("'(' or '['")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(s: &Seq) -> Vec<u64> {
        (0..s.len()).map(|j| s.get(j)).collect()
    }

    #[test]
    fn seed_example() {
        let p = parse("[(2, 6, 1), [1,3,4,7], (0, 12, 2)]").unwrap();
        assert_eq!(values(&p[0].resolve(10).unwrap()), [2, 3, 4, 5]);
        assert_eq!(values(&p[1].resolve(8).unwrap()), [1, 3, 4, 7]);
        assert_eq!(values(&p[2].resolve(12).unwrap()), [0, 2, 4, 6, 8, 10]);
    }

    #[test]
    fn ranges_follow_python() {
        let r = |s: &str, n| parse(s).unwrap()[0].resolve(n).map(|q| values(&q));
        assert_eq!(r("[(5, -1, -1)]", 6).unwrap(), [5, 4, 3, 2, 1, 0]);
        assert_eq!(r("[(5, 0, -2)]", 6).unwrap(), [5, 3, 1]);
        assert_eq!(r("[(None, None, -1)]", 3).unwrap(), [2, 1, 0]);
        assert_eq!(r("[(1, None)]", 3).unwrap(), [1, 2]);
        assert_eq!(r("[(0, 7, 3)]", 7).unwrap(), [0, 3, 6]);
        assert!(r("[(0, 8, 1)]", 7).unwrap_err().contains("outside"));
        assert!(r("[(3, 3, 1)]", 7).unwrap_err().contains("nothing"));
        assert!(r("[(0, 3, 0)]", 7).unwrap_err().contains("step of 0"));
        assert!(r("[(-1, 3, 1)]", 7).unwrap_err().contains("negative"));
        assert!(r("[[0, 9]]", 7).unwrap_err().contains("outside"));
        assert!(r("[[]]", 7).unwrap_err().contains("nothing"));
    }

    #[test]
    fn bad_strings() {
        for s in [
            "",
            "(",
            "[",
            "[(1,2,3)",
            "[(1)]",
            "[1]",
            "[(1,2,3,4)]",
            "[[1,-2]]",
            "[(a,1)]",
            "[(1,2)] x",
            "[[1,,2]]",
        ] {
            assert!(parse(s).is_err(), "{s:?} parsed");
        }
        assert_eq!(parse("[]").unwrap(), vec![]);
        assert_eq!(
            parse(" [ ( 1 , 2 ) ] ").unwrap(),
            vec![Sel::Range {
                start: Some(1),
                stop: Some(2),
                step: None
            }]
        );
    }

    #[test]
    fn slices() {
        let s = Seq::Prog {
            first: 10,
            step: 3,
            len: 5,
        }; // 10 13 16 19 22
        assert_eq!(values(&s.slice(1, 3, false)), [13, 16, 19]);
        assert_eq!(values(&s.slice(1, 3, true)), [19, 16, 13]);
        assert_eq!(s.slice(1, 3, true).bounds(), (13, 19));
        let l = Seq::List(vec![4, 1, 7, 7]);
        assert_eq!(values(&l.slice(1, 3, true)), [7, 7, 1]);
        assert_eq!(l.bounds(), (1, 7));
        assert!(Seq::List(vec![3, 4, 5]).is_ascending_run());
        assert!(!Seq::List(vec![3, 5]).is_ascending_run());
    }
}
