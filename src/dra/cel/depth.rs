//! The nesting limits of a selector, and the stack its compilation and
//! evaluation need.
//!
//! cel-rust's parser (ANTLR, recursive descent), its parse-tree visitor,
//! placer's AST walks (cost instrumentation, regex validation), the
//! interpreter and dropping the AST all recurse once per level of the
//! expression. A debug build spends about 175 KiB of stack per level of
//! brackets in the parser and 40 KiB per AST level in the interpreter, so
//! 16 nested `cel.bind`s overflowed a 2 MiB thread (rayon's and tokio's
//! default) and aborted the scheduler. In the spirit of cel-go's parser
//! option `MaxRecursionDepth` (default 250, which Kubernetes keeps), a
//! selector fails to compile when
//!
//! - its **nesting** exceeds [`MAX_NESTING`]: parentheses, brackets and
//!   braces (groups, calls, lists, maps, indexes) and chained conditionals,
//!   counted by a scan before the parser runs that skips string and bytes
//!   literals and comments as CEL's lexer reads them (cel-go: "expression
//!   recursion limit exceeded"); or
//! - its parsed **AST depth** exceeds [`MAX_DEPTH`]: every call, operator,
//!   field selection, index and macro is a level, so a chain `a + b + c` or
//!   `a.b.c` is as deep as it is long (cel-go: "max recursion depth
//!   exceeded"); `a || b || c` parses balanced and `!!x`, `--x` collapse.
//!
//! Within those limits the stack needed is known before it is used
//! ([`compile_stack`] from the nesting and length, [`eval_stack`] from the
//! depth of the instrumented AST), and compiling, each evaluation and
//! dropping the AST run on a stack at least that large: the caller's own
//! when it has that much left (any ordinary selector on any thread), else
//! a temporary one (`stacker`). The constants are upper bounds measured in
//! a debug build, with a quarter or more to spare (release frames are
//! smaller); `depth_tests.rs` runs every shape of nesting at exactly the
//! limits on 2 MiB threads, and each step on a thread of just the
//! estimated size.

use cel::common::ast::IdedExpr;

use super::budget::visit_children;

/// The deepest nesting of brackets and conditionals a selector may have.
pub(super) const MAX_NESTING: usize = 250;
/// The deepest AST a selector may parse to.
pub(super) const MAX_DEPTH: usize = 250;

/// Stack the compiler needs besides the expression's levels.
const COMPILE_BASE: usize = 512 << 10;
/// Stack the parser needs per level of nesting (measured: up to 175 KiB,
/// lists and maps).
const COMPILE_PER_NESTING: usize = 256 << 10;
/// Stack the parse-tree visitor needs per byte of the expression (a chain
/// `a.b.c` or `a+b+c` is one parse-tree level per two bytes; measured: up
/// to 0.95 KiB per byte).
const COMPILE_PER_BYTE: usize = 2 << 10;
/// Stack an evaluation needs besides the expression's levels.
const EVAL_BASE: usize = 128 << 10;
/// Stack the interpreter needs per level of the (instrumented) AST
/// (measured: up to 40 KiB).
const EVAL_PER_LEVEL: usize = 48 << 10;

/// The stack compiling an expression of `len` bytes and `nesting` needs.
pub(super) fn compile_stack(nesting: usize, len: usize) -> usize {
    // The parser may enter one level past its limit before it stops.
    COMPILE_BASE + (nesting + 2) * COMPILE_PER_NESTING + len * COMPILE_PER_BYTE
}

/// The stack evaluating (or dropping) an AST `depth` levels deep needs.
pub(super) fn eval_stack(depth: usize) -> usize {
    EVAL_BASE + depth * EVAL_PER_LEVEL
}

/// How deeply `expression` nests parenthesised groups, calls, lists, maps,
/// messages and chained conditionals (`a ? b : c ? d : e` nests twice), as
/// cel-rust's parser recurses on them: outside string and bytes literals
/// and comments, which are skipped as CEL's lexer reads them. A literal the
/// lexer would reject (an unterminated string, an unknown escape) is not
/// skipped, so its brackets count: the scan never counts fewer levels than
/// the parser enters.
pub(super) fn nesting(expression: &str) -> usize {
    let bytes = expression.as_bytes();
    // Per open group: the conditionals chained in it so far.
    let mut groups: Vec<usize> = vec![0];
    let mut depth = 0usize;
    let mut deepest = 0usize;
    // The last byte that was neither space nor part of a literal.
    let mut previous = b' ';
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(end) = literal_end(bytes, i) {
            i = end;
            previous = b'"';
            continue;
        }
        if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            i = bytes[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(bytes.len(), |p| i + p);
            continue;
        }
        match b {
            b'(' | b'[' | b'{' => {
                groups.push(0);
                depth += 1;
            }
            b')' | b']' | b'}' => {
                if groups.len() > 1
                    && let Some(conditionals) = groups.pop()
                {
                    depth -= 1 + conditionals;
                }
            }
            b',' => {
                // A conditional ends at a comma of its group.
                if let Some(conditionals) = groups.last_mut() {
                    depth -= *conditionals;
                    *conditionals = 0;
                }
            }
            // `.?f`, `[?e]`, `{?k: v}` and `, ?e` are optional syntax.
            b'?' if !matches!(previous, b'.' | b'[' | b'{' | b',') => {
                if let Some(conditionals) = groups.last_mut() {
                    *conditionals += 1;
                    depth += 1;
                }
            }
            _ => {}
        }
        deepest = deepest.max(depth);
        if !b.is_ascii_whitespace() {
            previous = b;
        }
        i += 1;
    }
    deepest
}

/// The end of the string or bytes literal starting at `i`, if one does and
/// is well formed (CEL's `STRING` and `BYTES` tokens).
fn literal_end(bytes: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    // A prefix letter only starts a literal where it does not continue an
    // identifier or number.
    let continues_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    if continues_word && !matches!(bytes[i], b'"' | b'\'') {
        return None;
    }
    let mut raw = false;
    let mut bytes_prefix = false;
    while let Some(&c) = bytes.get(j) {
        match c {
            b'r' | b'R' if !raw => raw = true,
            b'b' | b'B' if !bytes_prefix && !raw => bytes_prefix = true,
            _ => break,
        }
        j += 1;
    }
    let quote = *bytes.get(j)?;
    if quote != b'"' && quote != b'\'' {
        return None;
    }
    let triple = bytes.get(j + 1) == Some(&quote) && bytes.get(j + 2) == Some(&quote);
    let mut k = j + if triple { 3 } else { 1 };
    loop {
        let c = *bytes.get(k)?;
        if c == quote
            && (!triple || (bytes.get(k + 1) == Some(&quote) && bytes.get(k + 2) == Some(&quote)))
        {
            return Some(k + if triple { 3 } else { 1 });
        }
        if !triple && (c == b'\n' || c == b'\r') {
            return None;
        }
        if c == b'\\' && !raw {
            k += escape_len(&bytes[k..])?;
        } else {
            k += 1;
        }
    }
}

/// The length of the escape sequence at the start of `s` (which starts
/// with a backslash), if CEL's lexer accepts it.
fn escape_len(s: &[u8]) -> Option<usize> {
    let digits = |n: usize, radix: u32| {
        (s.len() > 1 + n && s[2..2 + n].iter().all(|&c| char::from(c).is_digit(radix)))
            .then_some(2 + n)
    };
    match *s.get(1)? {
        b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'"' | b'\'' | b'\\' | b'?' | b'`' => {
            Some(2)
        }
        b'x' | b'X' => digits(2, 16),
        b'u' => digits(4, 16),
        b'U' => digits(8, 16),
        b'0'..=b'3' => {
            (s.len() > 3 && s[2..4].iter().all(|c| (b'0'..=b'7').contains(c))).then_some(4)
        }
        _ => None,
    }
}

/// The depth of `e`: 1 for a leaf. Iterative, so any depth is safe to
/// measure.
pub(super) fn ast_depth(e: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(e, 1usize)];
    while let Some((e, depth)) = pending.pop() {
        deepest = deepest.max(depth);
        visit_children(e, |c| pending.push((c, depth + 1)));
    }
    deepest
}
