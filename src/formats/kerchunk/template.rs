//! The Jinja subset that reference files use: `{{ expression }}` in urls
//! and `gen` fields.
//!
//! fsspec renders references with Jinja2 (or, by default, a plain
//! `str.format` of `{{name}}`). Real files use two things: a template
//! name in a url (`"{{u}}"`, `"s3://bucket/{{f}}.nc"`) and, in `gen`,
//! integer arithmetic over the dimension variables
//! (`"{{ (i + 1) * 1000 }}"`, `"data_{{i}}.nc"`). That is what this
//! renders, without pulling in a template engine:
//!
//! ```text
//! expr  := term (("+" | "-") term)*
//! term  := unary (("*" | "//" | "%") unary)*
//! unary := ("-" | "+") unary | atom
//! atom  := integer | name | 'string' | "string" | "(" expr ")"
//! ```
//!
//! Integers are `i64` with Python's floor division and modulo (the sign of
//! the divisor); overflow and division by zero are errors. `+` joins two
//! strings, as in Jinja. Anything else (filters `|`, `/`, calls, `{% %}`
//! statements) is an error that says what is supported, never a silently
//! different result: `/` is true division in Jinja (`{{ 3 / 2 }}` renders
//! `1.5`), so it is refused rather than truncated.

use std::fmt;

/// A value in an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    Int(i64),
    Str(String),
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Int(i) => write!(f, "{i}"),
            Val::Str(s) => f.write_str(s),
        }
    }
}

/// How names are looked up: `Ok(None)` for an unknown name, `Err` for a
/// name that exists but cannot be used (a Jinja function template).
pub type Lookup<'a> = dyn Fn(&str) -> Result<Option<Val>, String> + 'a;

/// Expressions longer than this are refused, far beyond any real
/// reference file.
const MAX_EXPR_LEN: usize = 4096;

/// Nesting (parentheses, unary signs) deeper than this is refused: the
/// parser recurses, and input must not be able to exhaust the stack.
const MAX_DEPTH: usize = 64;

/// Render `text`, replacing every `{{ expression }}` with its value.
pub fn render(text: &str, lookup: &Lookup) -> Result<String, String> {
    if text.contains("{%") || text.contains("{#") {
        return Err(format!(
            "{text:?}: Jinja statements and comments ({{% %}}, {{# #}}) are not supported"
        ));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or_else(|| format!("{text:?}: \"{{{{\" without \"}}}}\""))?;
        let value = eval(&after[..close], lookup).map_err(|e| format!("{text:?}: {e}"))?;
        out.push_str(&value.to_string());
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Render `text` and read the result as a non-negative integer (a gen
/// entry's offset or length).
pub fn render_u64(text: &str, lookup: &Lookup) -> Result<u64, String> {
    let s = render(text, lookup)?;
    s.trim()
        .parse::<u64>()
        .map_err(|_| format!("{text:?} renders {s:?}, not a non-negative integer"))
}

/// Evaluate one expression (the inside of `{{ }}`).
pub fn eval(expr: &str, lookup: &Lookup) -> Result<Val, String> {
    if expr.len() > MAX_EXPR_LEN {
        return Err(format!("expression longer than {MAX_EXPR_LEN} bytes"));
    }
    let tokens = tokenize(expr)?;
    let mut p = Parser {
        tokens: &tokens,
        pos: 0,
        depth: 0,
        lookup,
    };
    let v = p.expr()?;
    match p.tokens.get(p.pos) {
        None => Ok(v),
        Some(t) => Err(format!("unexpected {t} in {{{{{expr}}}}}{}", HELP)),
    }
}

const HELP: &str = " (supported: integers, names, 'strings', + - * // % and parentheses)";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Int(i64),
    Name(String),
    Str(String),
    Op(&'static str),
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Int(i) => write!(f, "{i}"),
            Tok::Name(n) => write!(f, "name {n:?}"),
            Tok::Str(s) => write!(f, "string {s:?}"),
            Tok::Op(o) => write!(f, "{o:?}"),
        }
    }
}

fn tokenize(s: &str) -> Result<Vec<Tok>, String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'0'..=b'9' => {
                let start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let n = s[start..i]
                    .parse::<i64>()
                    .map_err(|_| format!("integer {} is too large", &s[start..i]))?;
                out.push(Tok::Int(n));
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                out.push(Tok::Name(s[start..i].to_string()));
            }
            b'\'' | b'"' => {
                let end = s[i + 1..]
                    .find(c as char)
                    .ok_or_else(|| format!("unterminated string in {{{{{s}}}}}"))?;
                out.push(Tok::Str(s[i + 1..i + 1 + end].to_string()));
                i += end + 2;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push(Tok::Op("//"));
                i += 2;
            }
            b'/' => {
                return Err(format!(
                    "\"/\" in {{{{{s}}}}} is true division (a float in Jinja); use \"//\""
                ));
            }
            b'+' | b'-' | b'*' | b'%' | b'(' | b')' => {
                out.push(Tok::Op(match c {
                    b'+' => "+",
                    b'-' => "-",
                    b'*' => "*",
                    b'%' => "%",
                    b'(' => "(",
                    _ => ")",
                }));
                i += 1;
            }
            _ => {
                let ch = s[i..].chars().next().unwrap_or('?');
                return Err(format!("unsupported {ch:?} in {{{{{s}}}}}{HELP}"));
            }
        }
    }
    Ok(out)
}

struct Parser<'t, 'l> {
    tokens: &'t [Tok],
    pos: usize,
    depth: usize,
    lookup: &'l Lookup<'l>,
}

impl Parser<'_, '_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn expr(&mut self) -> Result<Val, String> {
        let mut v = self.term()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let w = self.term()?;
            v = binary(op, v, w)?;
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<Val, String> {
        let mut v = self.unary()?;
        while let Some(op @ ("*" | "//" | "%")) = self.peek_op() {
            self.pos += 1;
            let w = self.unary()?;
            v = binary(op, v, w)?;
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<Val, String> {
        self.depth += 1;
        let v = self.unary_inner();
        self.depth -= 1;
        v
    }

    fn unary_inner(&mut self) -> Result<Val, String> {
        if self.depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                binary("-", Val::Int(0), self.unary()?)
            }
            Some("+") => {
                self.pos += 1;
                match self.unary()? {
                    Val::Int(i) => Ok(Val::Int(i)),
                    Val::Str(s) => Err(format!("unary + on string {s:?}")),
                }
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<Val, String> {
        let tok = self
            .tokens
            .get(self.pos)
            .cloned()
            .ok_or_else(|| "expression ends too early".to_string())?;
        self.pos += 1;
        match tok {
            Tok::Int(i) => Ok(Val::Int(i)),
            Tok::Str(s) => Ok(Val::Str(s)),
            Tok::Name(n) => {
                if matches!(self.tokens.get(self.pos), Some(Tok::Op("("))) {
                    return Err(format!(
                        "{n}(...): calls (Jinja function templates) are not supported"
                    ));
                }
                (self.lookup)(&n)?.ok_or_else(|| format!("unknown name {n:?}"))
            }
            Tok::Op("(") => {
                let v = self.expr()?;
                match self.tokens.get(self.pos) {
                    Some(Tok::Op(")")) => {
                        self.pos += 1;
                        Ok(v)
                    }
                    _ => Err("missing \")\"".to_string()),
                }
            }
            Tok::Op(o) => Err(format!("unexpected {o:?}{HELP}")),
        }
    }
}

fn binary(op: &str, a: Val, b: Val) -> Result<Val, String> {
    let overflow = || format!("integer overflow in {a} {op} {b}");
    match (&a, &b) {
        (Val::Int(x), Val::Int(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                "+" => x.checked_add(y),
                "-" => x.checked_sub(y),
                "*" => x.checked_mul(y),
                "//" | "%" if y == 0 => return Err(format!("division by zero in {x} {op} {y}")),
                // Python floors: -7 // 2 == -4, -7 % 2 == 1, 7 % -2 == -1.
                "//" => x.checked_div(y).map(|q| {
                    if x % y != 0 && ((x < 0) != (y < 0)) {
                        q - 1
                    } else {
                        q
                    }
                }),
                _ => x.checked_rem(y).map(|r| {
                    if r != 0 && ((r < 0) != (y < 0)) {
                        r + y
                    } else {
                        r
                    }
                }),
            };
            r.map(Val::Int).ok_or_else(overflow)
        }
        (Val::Str(x), Val::Str(y)) if op == "+" => Ok(Val::Str(format!("{x}{y}"))),
        _ => Err(format!("{op} of {a:?} and {b:?} is not supported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Result<Option<Val>, String> {
        Ok(match name {
            "i" => Some(Val::Int(3)),
            "n" => Some(Val::Int(-7)),
            "u" => Some(Val::Str("data/file.nc".into())),
            "f" => return Err("template \"f\" is a Jinja function".into()),
            _ => None,
        })
    }

    #[test]
    fn renders_names_and_arithmetic() {
        assert_eq!(render("{{u}}", &vars).unwrap(), "data/file.nc");
        assert_eq!(render("{{ u }}", &vars).unwrap(), "data/file.nc");
        assert_eq!(render("a_{{i}}_{{ i*2 }}.nc", &vars).unwrap(), "a_3_6.nc");
        assert_eq!(render("{{ (i + 1) * 1000 }}", &vars).unwrap(), "4000");
        assert_eq!(render("{{ 10 - 2 - 3 }}", &vars).unwrap(), "5");
        assert_eq!(render("{{ 2 + 3 * 4 }}", &vars).unwrap(), "14");
        assert_eq!(render("{{ -i }}", &vars).unwrap(), "-3");
        assert_eq!(render("{{ 'x/' + u }}", &vars).unwrap(), "x/data/file.nc");
        assert_eq!(render("no templates", &vars).unwrap(), "no templates");
        assert_eq!(render_u64(" {{ i * 7 }} ", &vars).unwrap(), 21);
    }

    #[test]
    fn floors_like_python() {
        let e = |s: &str| eval(s, &vars).unwrap();
        assert_eq!(e("n // 2"), Val::Int(-4));
        assert_eq!(e("n % 2"), Val::Int(1));
        assert_eq!(e("7 % -2"), Val::Int(-1));
        assert_eq!(e("7 // -2"), Val::Int(-4));
        assert_eq!(e("6 // 3"), Val::Int(2));
        assert_eq!(e("-6 % 3"), Val::Int(0));
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        for (text, why) in [
            ("{{ i / 2 }}", "true division"),
            ("{{ i | string }}", "unsupported '|'"),
            ("{{ f(1) }}", "calls"),
            ("{{ f(c='x') }}", "unsupported '='"),
            ("{{ nope }}", "unknown name"),
            ("{{ i ", "without"),
            ("{% if i %}x{% endif %}", "statements"),
            ("{{ 1 // 0 }}", "division by zero"),
            ("{{ 9223372036854775807 + 1 }}", "overflow"),
            ("{{ 99999999999999999999 }}", "too large"),
            ("{{ u * 2 }}", "not supported"),
            ("{{ (1 + 2 }}", "missing"),
            ("{{ 1 2 }}", "unexpected"),
            ("{{ }}", "ends too early"),
            ("{{ 'abc }}", "unterminated"),
        ] {
            let err = render(text, &vars).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        assert!(
            render("{{ f }}", &vars)
                .unwrap_err()
                .contains("Jinja function")
        );
        assert!(render_u64("{{ -1 }}", &vars).is_err());
        assert!(render_u64("{{ u }}", &vars).is_err());
        let deep = format!("{{{{{}1{}}}}}", "(".repeat(5000), ")".repeat(5000));
        assert!(render(&deep, &vars).unwrap_err().contains("longer than"));
        let nested = format!("{{{{{}1{}}}}}", "(".repeat(100), ")".repeat(100));
        assert!(render(&nested, &vars).unwrap_err().contains("deeper"));
        let signs = format!("{{{{{}1}}}}", "-".repeat(100));
        assert!(render(&signs, &vars).unwrap_err().contains("deeper"));
        let ok = format!("{{{{{}1{}}}}}", "(".repeat(20), ")".repeat(20));
        assert_eq!(render(&ok, &vars).unwrap(), "1");
    }
}
