//! The syntax tree of one rule expression, as parsed and before type checking.
//!
//! Every node keeps the byte offset in the expression text where it starts, so that the type
//! checker can point errors at the right character of the rules file.

/// A parsed expression node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ast {
    pub kind: AstKind,
    /// Byte offset of the node's first character in the expression text.
    pub at: usize,
    /// Height of the subtree (1 for a leaf). Bounded by the parser so that the recursive
    /// checker, evaluator and destructor cannot exhaust the stack.
    pub height: usize,
    /// Byte range of the node's whole text, parentheses included (`at` may lie inside it:
    /// it is where errors point). The rules coverage report shows this text.
    pub span: (usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AstKind {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Ident(String),
    Regex {
        body: String,
        flags: String,
    },
    Array(Vec<Ast>),
    Unary(UnaryOp, Box<Ast>),
    Binary(BinaryOp, Box<Ast>, Box<Ast>),
    /// `a && b && c`, flattened so that long chains do not make deep trees.
    And(Vec<Ast>),
    /// `a || b || c`, flattened likewise.
    Or(Vec<Ast>),
    Cond(Box<Ast>, Box<Ast>, Box<Ast>),
    /// `target.name`; `name_at` is the offset of the name.
    Member {
        target: Box<Ast>,
        name: String,
        name_at: usize,
    },
    /// `target[index]`.
    Index(Box<Ast>, Box<Ast>),
    /// `callee(args)`.
    Call(Box<Ast>, Vec<Ast>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnaryOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl BinaryOp {
    pub fn text(self) -> &'static str {
        match self {
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
        }
    }
}

impl Ast {
    /// A node over `children`, one taller than the tallest of them.
    pub fn new(kind: AstKind, at: usize) -> Ast {
        let height = 1 + match &kind {
            AstKind::Null
            | AstKind::Bool(_)
            | AstKind::Num(_)
            | AstKind::Str(_)
            | AstKind::Ident(_)
            | AstKind::Regex { .. } => 0,
            AstKind::Array(items) | AstKind::And(items) | AstKind::Or(items) => {
                items.iter().map(|a| a.height).max().unwrap_or(0)
            }
            AstKind::Unary(_, a) | AstKind::Member { target: a, .. } => a.height,
            AstKind::Binary(_, a, b) | AstKind::Index(a, b) => a.height.max(b.height),
            AstKind::Cond(a, b, c) => a.height.max(b.height).max(c.height),
            AstKind::Call(callee, args) => args
                .iter()
                .map(|a| a.height)
                .max()
                .unwrap_or(0)
                .max(callee.height),
        };
        Ast {
            kind,
            at,
            height,
            span: (at, at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn height_counts_the_tallest_branch() {
        let leaf = |n| Ast::new(AstKind::Num(n), 0);
        assert_eq!(leaf(1.0).height, 1);
        let sum = Ast::new(
            AstKind::Binary(BinaryOp::Add, Box::new(leaf(1.0)), Box::new(leaf(2.0))),
            0,
        );
        assert_eq!(sum.height, 2);
        let chain = Ast::new(AstKind::And(vec![leaf(1.0), sum, leaf(3.0)]), 0);
        assert_eq!(chain.height, 3);
        let call = Ast::new(AstKind::Call(Box::new(leaf(0.0)), vec![]), 0);
        assert_eq!(call.height, 2);
    }
}
