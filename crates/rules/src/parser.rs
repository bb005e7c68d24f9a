//! Recursive-descent parser for rule expressions (grammar of spec §5.2).
//!
//! Nesting is bounded by [`MAX_EXPR_DEPTH`]: rules come from operators, not attackers, but a
//! pathological document must be refused with an error rather than overflow the stack of the
//! server thread that loads it.

use crate::ast::{Ast, AstKind, BinaryOp, UnaryOp};
use crate::error::LoadError;
use crate::lexer::{tokenize, Punct, Tok, Token};

/// Deepest nesting of an expression (parentheses, operands, member chains). Real rules nest
/// a handful of levels; the bound keeps checking and evaluation recursion shallow.
pub const MAX_EXPR_DEPTH: usize = 128;

/// A parse failure: byte offset in the expression text and reason.
pub(crate) type ParseError = (usize, LoadError);

/// Parses one whole expression.
pub(crate) fn parse(src: &str) -> Result<Ast, ParseError> {
    let tokens = tokenize(src)?;
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
        last_end: 0,
    };
    if parser.peek() == &Tok::Eof {
        return Err((0, LoadError::Syntax("empty expression".into())));
    }
    let ast = parser.expression()?;
    if parser.peek() != &Tok::Eof {
        return Err(parser.unexpected());
    }
    Ok(ast)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    /// End of the last token consumed: where the node being built ends.
    last_end: usize,
}

impl Parser {
    fn token(&self) -> &Token {
        // `tokenize` always ends with `Eof`, and `advance` never moves past it.
        &self.tokens[self.pos.min(self.tokens.len() - 1)]
    }

    fn peek(&self) -> &Tok {
        &self.token().tok
    }

    fn at(&self) -> usize {
        self.token().start
    }

    fn advance(&mut self) -> Token {
        let token = self.token().clone();
        self.last_end = token.end;
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        token
    }

    fn eat(&mut self, punct: Punct) -> bool {
        if self.peek() == &Tok::Punct(punct) {
            self.advance();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, punct: Punct) -> Result<(), ParseError> {
        if self.eat(punct) {
            Ok(())
        } else {
            Err((
                self.at(),
                LoadError::Syntax(format!(
                    "expected '{}' but found {}",
                    punct.text(),
                    describe(self.peek())
                )),
            ))
        }
    }

    fn unexpected(&self) -> ParseError {
        (
            self.at(),
            LoadError::Syntax(format!("unexpected {}", describe(self.peek()))),
        )
    }

    /// Builds a node that ends with the last token consumed, refusing it if it makes the
    /// tree too tall.
    fn node(&self, kind: AstKind, at: usize) -> Result<Ast, ParseError> {
        let start = match &kind {
            AstKind::Binary(_, first, _)
            | AstKind::Index(first, _)
            | AstKind::Member { target: first, .. }
            | AstKind::Call(first, _)
            | AstKind::Cond(first, _, _) => first.span.0,
            AstKind::And(items) | AstKind::Or(items) => items.first().map_or(at, |a| a.span.0),
            _ => at,
        };
        let mut ast = Ast::new(kind, at);
        ast.span = (start.min(at), self.last_end.max(at));
        if ast.height > MAX_EXPR_DEPTH {
            return Err((at, LoadError::ExpressionTooDeep(MAX_EXPR_DEPTH)));
        }
        Ok(ast)
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_EXPR_DEPTH {
            return Err((self.at(), LoadError::ExpressionTooDeep(MAX_EXPR_DEPTH)));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<Ast, ParseError> {
        self.enter()?;
        let result = self.conditional();
        self.depth -= 1;
        result
    }

    fn conditional(&mut self) -> Result<Ast, ParseError> {
        let cond = self.binary(1)?;
        if !self.eat(Punct::Question) {
            return Ok(cond);
        }
        let then = self.expression()?;
        self.expect(Punct::Colon)?;
        let otherwise = self.expression()?;
        let at = cond.at;
        self.node(
            AstKind::Cond(Box::new(cond), Box::new(then), Box::new(otherwise)),
            at,
        )
    }

    /// Binary operators by precedence climbing: one frame per operator actually nested, not
    /// one per grammar level, which keeps deep nesting cheap on the stack.
    fn binary(&mut self, min_precedence: u8) -> Result<Ast, ParseError> {
        let mut left = self.unary()?;
        loop {
            let Some((op, precedence)) = binary_operator(self.peek()) else {
                return Ok(left);
            };
            if precedence < min_precedence {
                return Ok(left);
            }
            self.advance();
            // Left-associative: the right operand only takes tighter operators.
            let right = self.binary(precedence + 1)?;
            left = match op {
                Operator::And => self.chain(left, right, true)?,
                Operator::Or => self.chain(left, right, false)?,
                Operator::Binary(op) => {
                    let at = left.at;
                    self.node(AstKind::Binary(op, Box::new(left), Box::new(right)), at)?
                }
            };
        }
    }

    /// Appends to an `&&` (or `||`) chain, so that long chains stay flat.
    fn chain(&self, left: Ast, right: Ast, and: bool) -> Result<Ast, ParseError> {
        let at = left.at;
        let span = left.span;
        match (left.kind, and) {
            (AstKind::And(mut items), true) | (AstKind::Or(mut items), false) => {
                items.push(right);
                let kind = if and {
                    AstKind::And(items)
                } else {
                    AstKind::Or(items)
                };
                self.node(kind, at)
            }
            (kind, _) => {
                let left = Ast {
                    kind,
                    at,
                    height: left.height,
                    span,
                };
                let items = vec![left, right];
                let kind = if and {
                    AstKind::And(items)
                } else {
                    AstKind::Or(items)
                };
                self.node(kind, at)
            }
        }
    }

    fn unary(&mut self) -> Result<Ast, ParseError> {
        let op = match self.peek() {
            Tok::Punct(Punct::Not) => UnaryOp::Not,
            Tok::Punct(Punct::Minus) => UnaryOp::Neg,
            Tok::Punct(Punct::Plus) => {
                return Err((
                    self.at(),
                    LoadError::Syntax("unary '+' is not part of the rules language".into()),
                ))
            }
            _ => return self.postfix(),
        };
        let at = self.advance().start;
        self.enter()?;
        let operand = self.unary();
        self.depth -= 1;
        self.node(AstKind::Unary(op, Box::new(operand?)), at)
    }

    fn postfix(&mut self) -> Result<Ast, ParseError> {
        let mut ast = self.primary()?;
        loop {
            let at = ast.at;
            if self.eat(Punct::Dot) {
                let token = self.advance();
                let Tok::Ident(name) = token.tok else {
                    return Err((
                        token.start,
                        LoadError::Syntax(format!(
                            "expected a property name after '.' but found {}",
                            describe(&token.tok)
                        )),
                    ));
                };
                let kind = AstKind::Member {
                    target: Box::new(ast),
                    name,
                    name_at: token.start,
                };
                ast = self.node(kind, at)?;
            } else if self.eat(Punct::LBracket) {
                let index = self.expression()?;
                self.expect(Punct::RBracket)?;
                ast = self.node(AstKind::Index(Box::new(ast), Box::new(index)), at)?;
            } else if self.eat(Punct::LParen) {
                let args = self.list(Punct::RParen)?;
                ast = self.node(AstKind::Call(Box::new(ast), args), at)?;
            } else {
                return Ok(ast);
            }
        }
    }

    /// Comma-separated expressions up to `close` (which is consumed).
    fn list(&mut self, close: Punct) -> Result<Vec<Ast>, ParseError> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Ok(items);
        }
        loop {
            items.push(self.expression()?);
            if self.eat(close) {
                return Ok(items);
            }
            self.expect(Punct::Comma)?;
        }
    }

    fn primary(&mut self) -> Result<Ast, ParseError> {
        let at = self.at();
        let kind = match self.peek().clone() {
            Tok::Num(n) => AstKind::Num(n),
            Tok::Str(s) => AstKind::Str(s),
            Tok::Regex { body, flags } => AstKind::Regex { body, flags },
            Tok::Ident(name) => match name.as_str() {
                "true" => AstKind::Bool(true),
                "false" => AstKind::Bool(false),
                "null" => AstKind::Null,
                _ => AstKind::Ident(name),
            },
            Tok::Punct(Punct::LParen) => {
                self.advance();
                let mut inner = self.expression()?;
                self.expect(Punct::RParen)?;
                inner.span = (at, self.last_end);
                return Ok(inner);
            }
            Tok::Punct(Punct::LBracket) => {
                self.advance();
                self.enter()?;
                let items = self.list(Punct::RBracket);
                self.depth -= 1;
                return self.node(AstKind::Array(items?), at);
            }
            Tok::Punct(_) | Tok::Eof => return Err(self.unexpected()),
        };
        self.advance();
        // A name followed by a literal is JavaScript statement syntax (`var x = 1`).
        if let (AstKind::Ident(name), Tok::Ident(_)) = (&kind, self.peek()) {
            return Err((
                at,
                LoadError::Syntax(format!(
                    "unexpected name after '{name}': a rule is a single expression"
                )),
            ));
        }
        self.node(kind, at)
    }
}

enum Operator {
    And,
    Or,
    Binary(BinaryOp),
}

/// The binary operator at `tok` and its precedence (higher binds tighter).
fn binary_operator(tok: &Tok) -> Option<(Operator, u8)> {
    let Tok::Punct(p) = tok else { return None };
    Some(match p {
        Punct::OrOr => (Operator::Or, 1),
        Punct::AndAnd => (Operator::And, 2),
        Punct::EqEq | Punct::EqEqEq => (Operator::Binary(BinaryOp::Eq), 3),
        Punct::NotEq | Punct::NotEqEq => (Operator::Binary(BinaryOp::Ne), 3),
        Punct::Lt => (Operator::Binary(BinaryOp::Lt), 4),
        Punct::Le => (Operator::Binary(BinaryOp::Le), 4),
        Punct::Gt => (Operator::Binary(BinaryOp::Gt), 4),
        Punct::Ge => (Operator::Binary(BinaryOp::Ge), 4),
        Punct::Plus => (Operator::Binary(BinaryOp::Add), 5),
        Punct::Minus => (Operator::Binary(BinaryOp::Sub), 5),
        Punct::Star => (Operator::Binary(BinaryOp::Mul), 6),
        Punct::Slash => (Operator::Binary(BinaryOp::Div), 6),
        Punct::Percent => (Operator::Binary(BinaryOp::Rem), 6),
        _ => return None,
    })
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Num(n) => format!("the number {n}"),
        Tok::Str(_) => "a string".into(),
        Tok::Ident(name) => format!("'{name}'"),
        Tok::Regex { .. } => "a regular expression".into(),
        Tok::Punct(p) => format!("'{}'", p.text()),
        Tok::Eof => "the end of the expression".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders the tree in a compact prefix form for assertions.
    fn show(ast: &Ast) -> String {
        let list = |items: &[Ast]| items.iter().map(show).collect::<Vec<_>>().join(" ");
        match &ast.kind {
            AstKind::Null => "null".into(),
            AstKind::Bool(b) => b.to_string(),
            AstKind::Num(n) => n.to_string(),
            AstKind::Str(s) => format!("'{s}'"),
            AstKind::Ident(name) => name.clone(),
            AstKind::Regex { body, flags } => format!("/{body}/{flags}"),
            AstKind::Array(items) => format!("[{}]", list(items)),
            AstKind::Unary(UnaryOp::Not, a) => format!("(! {})", show(a)),
            AstKind::Unary(UnaryOp::Neg, a) => format!("(neg {})", show(a)),
            AstKind::Binary(op, a, b) => format!("({} {} {})", op.text(), show(a), show(b)),
            AstKind::And(items) => format!("(&& {})", list(items)),
            AstKind::Or(items) => format!("(|| {})", list(items)),
            AstKind::Cond(a, b, c) => format!("(? {} {} {})", show(a), show(b), show(c)),
            AstKind::Member { target, name, .. } => format!("{}.{name}", show(target)),
            AstKind::Index(a, b) => format!("{}[{}]", show(a), show(b)),
            AstKind::Call(callee, args) => format!("{}({})", show(callee), list(args)),
        }
    }

    fn p(src: &str) -> String {
        show(&parse(src).expect("valid"))
    }

    fn e(src: &str) -> (usize, String) {
        let (at, reason) = parse(src).expect_err("invalid");
        (at, reason.to_string())
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(p("1 + 2 * 3"), "(+ 1 (* 2 3))");
        assert_eq!(p("1 - 2 - 3"), "(- (- 1 2) 3)");
        assert_eq!(p("-(2 - 5) === 3"), "(== (neg (- 2 5)) 3)");
        assert_eq!(p("a || b && c || d"), "(|| a (&& b c) d)");
        assert_eq!(p("a < b == c"), "(== (< a b) c)");
        assert_eq!(p("!a && !!b"), "(&& (! a) (! (! b)))");
        assert_eq!(p("a ? b : c ? d : e"), "(? a b (? c d e))");
        assert_eq!(p("a ? b ? c : d : e"), "(? a (? b c d) e)");
        assert_eq!(p("7 % 2 / 1"), "(/ (% 7 2) 1)");
    }

    #[test]
    fn postfix_chains() {
        assert_eq!(
            p("root.child('a/b').val().length"),
            "root.child('a/b').val().length"
        );
        assert_eq!(p("auth.foo[$bar]"), "auth.foo[$bar]");
        assert_eq!(p("root['exists']()"), "root['exists']()");
        assert_eq!(p("d.hasChildren(['a', 'b'])"), "d.hasChildren(['a' 'b'])");
        assert_eq!(p("s.matches(/^a$/i)"), "s.matches(/^a$/i)");
        assert_eq!(p("f()"), "f()");
        assert_eq!(p("(((true)))"), "true");
    }

    #[test]
    fn offsets_point_at_operands() {
        let ast = parse("  auth.uid === 'x'").expect("valid");
        assert_eq!(ast.at, 2);
        let AstKind::Binary(_, left, right) = &ast.kind else {
            panic!("binary expected")
        };
        assert_eq!(right.at, 15);
        let AstKind::Member { name_at, .. } = &left.kind else {
            panic!("member expected")
        };
        assert_eq!(*name_at, 7);
    }

    #[test]
    fn statements_and_junk_are_refused() {
        assert!(e("var foo = 8").1.contains("assignments"));
        assert!(e("var foo").1.contains("single expression"));
        assert!(e("auth.uid === '5'; auth.id === 5").1.contains("';'"));
        assert_eq!(e("a b").0, 0);
        assert!(e("").1.contains("empty"));
        assert!(e("(a").1.contains("expected ')'"));
        assert!(e("a.").1.contains("property name"));
        assert!(e("a ? b").1.contains("expected ':'"));
        assert!(e("+a").1.contains("unary '+'"));
        assert_eq!(e("a )").0, 2);
        assert!(e("f(a,)").1.contains("unexpected ')'"));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!(
            "{}1{}",
            "(".repeat(MAX_EXPR_DEPTH + 1),
            ")".repeat(MAX_EXPR_DEPTH + 1)
        );
        assert!(e(&deep).1.contains("nests deeper"));
        let negations = format!("{}true", "!".repeat(MAX_EXPR_DEPTH + 1));
        assert!(e(&negations).1.contains("nests deeper"));
        let sum = vec!["1"; MAX_EXPR_DEPTH + 2].join(" + ");
        assert!(e(&sum).1.contains("nests deeper"));
        // Long && / || chains stay flat and are fine.
        let chain = vec!["true"; 5000].join(" && ");
        assert_eq!(parse(&chain).expect("valid").height, 2);
    }
}
