//! The seal: the shape of a program file, checked on its syntax tree before anything of it runs.
//!
//! A program is one Starlark module whose top level holds only literal assignments (among them
//! `FOOTPRINT`, `DESCRIPTION` and `INPUT`) and `def`s, one of which is `main(input)`. Refused:
//! `load`, `while` (the dialect reserves it), `lambda`, a `def` inside a `def`, a default value
//! that is not a literal (it would run at load), any other top-level statement, a program
//! function named other than as the callee of a call, and a cycle of calls among the program's
//! functions. With no function values and an acyclic call graph, no program can recurse.
//!
//! The walk also gathers every name a function refers to without binding it, for the type check
//! ([`crate::types`]). Pure: it reads the parsed module and nothing else.

use std::collections::{BTreeMap, BTreeSet};

use l3m_core::effects::{EffectClass, Footprint};
use serde_json::Value;
use starlark::syntax::{AstModule, Dialect, DialectTypes};
use starlark_syntax::codemap::{CodeMap, Span};
use starlark_syntax::lexer::TokenInt;
use starlark_syntax::syntax::ast::{
    ArgumentP, AssignTargetP, AstAssignTarget, AstExpr, AstLiteral, AstNoPayload, AstStmt, ClauseP,
    DefP, ExprP, ForClauseP, ParameterP, StmtP,
};
use starlark_syntax::syntax::module::AstModuleFields;
use starlark_syntax::syntax::uniplate::Visit;

use crate::rule::{LoadError, Rule};
use crate::types::Reference;

/// The dialect programs are parsed in. It is wider than what the seal admits (it parses `load`,
/// `lambda` and top-level statements) so that each is refused by a named rule with its line,
/// not by a bare syntax error; f-strings and type annotations do not parse at all.
pub(crate) const DIALECT: Dialect = Dialect {
    enable_def: true,
    enable_lambda: true,
    enable_load: true,
    enable_keyword_only_arguments: false,
    enable_positional_only_arguments: false,
    enable_types: DialectTypes::Disable,
    enable_load_reexport: false,
    enable_top_level_stmt: true,
    enable_f_strings: false,
    _non_exhaustive: (),
};

/// The name of the entry point, called with the input.
pub const ENTRY: &str = "main";

/// The name of a hook's entry point, called with each event.
pub const HOOK_ENTRY: &str = "on_event";

/// What the seal found in a well-shaped program.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// `DESCRIPTION`.
    pub description: String,
    /// `FOOTPRINT`, as classes.
    pub footprint: Footprint,
    /// The line of `FOOTPRINT`.
    pub footprint_line: u32,
    /// `INPUT`.
    pub input_schema: Value,
    /// The names the program's functions use without binding them, with their lines.
    pub free: Vec<Reference>,
}

/// The seal check of a parsed hooks file: the programs' dialect, no effect class and
/// `def on_event(event)`. Returns the names its functions use without binding them.
pub fn seal_hook(file: &str, module: &AstModule) -> Result<Vec<Reference>, LoadError> {
    let walker = Walker {
        file,
        codemap: module.codemap(),
    };
    walker.hook(module.statement())
}

/// How deep statements and expressions may nest. The interpreter compiles and evaluates a
/// module by recursion over its syntax tree, so a source nested deeper (`X = [[[...]]]` a few
/// hundred times, well within [`crate::decl::MAX_SOURCE`]) would overflow the stack of the
/// process checking it instead of being refused; real programs nest a few dozen levels.
pub const MAX_NESTING: usize = 64;

/// Parses `source` (named `file`) in the programs' dialect, refusing one nested deeper than
/// [`MAX_NESTING`].
pub fn parse(file: &str, source: &str) -> Result<AstModule, LoadError> {
    within_nesting_text(file, source)?;
    let module = parse_syntax(file, source)?;
    within_nesting(file, &module)?;
    Ok(module)
}

/// How many operators, calls, indexes and attribute reads may chain in one expression before
/// a comma, colon or new statement, as the text counts them. The parser recurses on a chain
/// (`- - - 1`, `1 + 1 + ...`, `x[0][0]...`), and so does dropping what it built, so the text
/// is bounded before it is parsed; the tree is then bounded by [`MAX_NESTING`].
const MAX_CHAIN: usize = 1024;

/// Refuses text whose brackets nest deeper than [`MAX_NESTING`], or that chains more than
/// [`MAX_CHAIN`] operators in one expression, before the parser sees it. Strings and comments
/// are skipped.
fn within_nesting_text(file: &str, source: &str) -> Result<(), LoadError> {
    let bytes = source.as_bytes();
    // One chain per open bracket, and the statement's own.
    let mut chains: Vec<usize> = vec![0];
    let (mut line, mut i) = (1u32, 0usize);
    while i < bytes.len() {
        let mut link = 0;
        match bytes[i] {
            b'#' => {
                while i + 1 < bytes.len() && bytes[i + 1] != b'\n' {
                    i += 1;
                }
            }
            quote @ (b'"' | b'\'') => {
                let triple = bytes.get(i + 1..i + 3) == Some(&[quote, quote][..]);
                i += if triple { 3 } else { 1 };
                while i < bytes.len() {
                    match bytes[i] {
                        b'\\' => i += 1,
                        b'\n' => line = line.saturating_add(1),
                        b if b == quote
                            && (!triple
                                || bytes.get(i + 1..i + 3) == Some(&[quote, quote][..])) =>
                        {
                            i += if triple { 2 } else { 0 };
                            break;
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                if let Some(chain) = chains.last_mut() {
                    *chain += 1;
                }
                chains.push(0);
            }
            b')' | b']' | b'}' if chains.len() > 1 => {
                chains.pop();
            }
            b',' | b':' | b';' => {
                if let Some(chain) = chains.last_mut() {
                    *chain = 0;
                }
            }
            b'\n' => {
                line = line.saturating_add(1);
                if let [chain] = chains.as_mut_slice() {
                    *chain = 0;
                }
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'|' | b'&' | b'^' | b'<' | b'>' | b'=' | b'!'
            | b'~' | b'.' | b'@' => link = 1,
            b if is_word(Some(&b)) => {
                let start = i;
                while is_word(bytes.get(i + 1)) {
                    i += 1;
                }
                let word = &bytes[start..=i];
                if matches!(
                    word,
                    b"and" | b"or" | b"not" | b"in" | b"is" | b"if" | b"else" | b"lambda"
                ) {
                    link = 1;
                }
            }
            _ => {}
        }
        if let Some(chain) = chains.last_mut() {
            *chain += link;
        }
        let chained = chains.last().copied().unwrap_or(0);
        if chains.len() > MAX_NESTING + 1 || chained > MAX_CHAIN {
            return Err(LoadError::new(
                file,
                line,
                Rule::TooLarge,
                format!(
                    "nested more than {MAX_NESTING} brackets deep, or more than {MAX_CHAIN} \
                     operators in one expression; flatten it"
                ),
            ));
        }
        i += 1;
    }
    Ok(())
}

/// Whether `b` continues an identifier or a number.
fn is_word(b: Option<&u8>) -> bool {
    b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// Walks the tree with an explicit stack (so the walk itself cannot overflow) and refuses the
/// first node deeper than [`MAX_NESTING`], at its line.
fn within_nesting(file: &str, module: &AstModule) -> Result<(), LoadError> {
    let mut stack = vec![(Visit::Stmt(module.statement()), 1usize)];
    while let Some((node, depth)) = stack.pop() {
        if depth > MAX_NESTING {
            let span = match node {
                Visit::Stmt(stmt) => stmt.span,
                Visit::Expr(expr) => expr.span,
            };
            return Err(LoadError::new(
                file,
                line_number(module.codemap().find_line(span.begin())),
                Rule::TooLarge,
                format!("nested more than {MAX_NESTING} levels deep; flatten it"),
            ));
        }
        node.visit_children(|child| stack.push((child, depth + 1)));
    }
    Ok(())
}

fn parse_syntax(file: &str, source: &str) -> Result<AstModule, LoadError> {
    AstModule::parse(file, source.to_owned(), &DIALECT).map_err(|e| {
        let span = e.span();
        let line = span.map_or(1, |s| line_number(s.resolve_span().begin.line));
        let rule = if span.is_some_and(|s| s.source_span() == "while") {
            Rule::NoWhile
        } else {
            Rule::Syntax
        };
        let detail = match rule {
            Rule::NoWhile => "`while` loops are not in the dialect; loop with `for` over a \
                              bounded `range`"
                .to_owned(),
            _ => e.without_diagnostic().to_string(),
        };
        LoadError::new(file, line, rule, detail)
    })
}

/// The seal check of a parsed module.
pub fn seal(file: &str, module: &AstModule) -> Result<Shape, LoadError> {
    let walker = Walker {
        file,
        codemap: module.codemap(),
    };
    walker.module(module.statement())
}

/// A 0-based line as the 1-based number refusals print.
fn line_number(zero_based: usize) -> u32 {
    u32::try_from(zero_based.saturating_add(1)).unwrap_or(u32::MAX)
}

struct Walker<'a> {
    file: &'a str,
    codemap: &'a CodeMap,
}

/// A top-level `def`, kept for the second pass over function bodies.
struct Def<'a> {
    def: &'a DefP<AstNoPayload>,
    line: u32,
}

/// One function body being walked.
struct Body<'a> {
    /// The program's own top-level functions.
    defs: &'a BTreeSet<String>,
    /// The program's top-level constants.
    constants: &'a BTreeSet<String>,
    /// Names the function binds (parameters, assignments, loop and comprehension variables).
    locals: BTreeSet<String>,
    /// Calls to the program's own functions: callee → the first line calling it.
    calls: BTreeMap<String, u32>,
    /// Names used without being bound here or at the top level.
    free: Vec<Reference>,
}

impl<'a> Walker<'a> {
    fn line(&self, span: Span) -> u32 {
        line_number(self.codemap.find_line(span.begin()))
    }

    fn refuse(&self, span: Span, rule: Rule, detail: impl Into<String>) -> LoadError {
        LoadError::new(self.file, self.line(span), rule, detail)
    }

    fn module(&self, top: &AstStmt) -> Result<Shape, LoadError> {
        let (defs, constants) = self.top_level(top)?;
        let (footprint, footprint_line) = self.footprint(constants.get("FOOTPRINT"))?;
        let description = match constants.get("DESCRIPTION") {
            Some((Value::String(s), _)) if !s.trim().is_empty() => s.clone(),
            Some((_, line)) => {
                return Err(LoadError::new(
                    self.file,
                    *line,
                    Rule::Description,
                    "DESCRIPTION must be a non-empty string literal",
                ));
            }
            None => {
                return Err(LoadError::new(
                    self.file,
                    1,
                    Rule::Description,
                    "DESCRIPTION is missing: say in a string literal what the program does",
                ));
            }
        };
        let input_schema = match constants.get("INPUT") {
            Some((schema @ Value::Object(map), line))
                if map.get("type").and_then(Value::as_str) == Some("object") =>
            {
                crate::input::check_schema(schema).map_err(|reason| {
                    LoadError::new(self.file, *line, Rule::InputSchema, reason)
                })?;
                schema.clone()
            }
            Some((_, line)) => {
                return Err(LoadError::new(
                    self.file,
                    *line,
                    Rule::InputSchema,
                    "INPUT must be a dict literal JSON Schema with \"type\": \"object\"",
                ));
            }
            None => {
                return Err(LoadError::new(
                    self.file,
                    1,
                    Rule::InputSchema,
                    "INPUT is missing: give the JSON Schema of the input as a dict literal",
                ));
            }
        };
        self.entry(&defs, ENTRY, "input", "what a call runs")?;
        let free = self.bodies(&defs, &constants)?;
        Ok(Shape {
            description,
            footprint,
            footprint_line,
            input_schema,
            free,
        })
    }

    /// The seal of a hooks file: the shared dialect, no effect class (a `FOOTPRINT`, if any, is
    /// empty) and `def on_event(event)`.
    fn hook(&self, top: &AstStmt) -> Result<Vec<Reference>, LoadError> {
        let (defs, constants) = self.top_level(top)?;
        match constants.get("FOOTPRINT") {
            None => {}
            Some((Value::Array(items), _)) if items.is_empty() => {}
            Some((_, line)) => {
                return Err(LoadError::new(
                    self.file,
                    *line,
                    Rule::NoEffect,
                    "a hook has no effect class: FOOTPRINT must be absent or `[]`",
                ));
            }
        }
        self.entry(&defs, HOOK_ENTRY, "event", "what each event runs")?;
        self.bodies(&defs, &constants)
    }

    /// The top level of a module: its `def`s and its literal constants, anything else refused.
    #[allow(clippy::type_complexity)]
    fn top_level<'m>(
        &self,
        top: &'m AstStmt,
    ) -> Result<(BTreeMap<String, Def<'m>>, BTreeMap<String, (Value, u32)>), LoadError> {
        let statements: Vec<&AstStmt> = match &top.node {
            StmtP::Statements(list) => list.iter().collect(),
            _ => vec![top],
        };
        let mut defs: BTreeMap<String, Def<'m>> = BTreeMap::new();
        let mut constants: BTreeMap<String, (Value, u32)> = BTreeMap::new();
        for stmt in statements {
            match &stmt.node {
                StmtP::Load(_) => {
                    return Err(self.refuse(
                        stmt.span,
                        Rule::NoLoad,
                        "`load` is refused: a program is one module and brings in nothing",
                    ));
                }
                StmtP::Def(def) => {
                    let name = def.name.node.ident.clone();
                    self.check_params(def)?;
                    if defs.contains_key(&name) || constants.contains_key(&name) {
                        return Err(self.refuse(
                            stmt.span,
                            Rule::TopLevel,
                            format!("`{name}` is defined twice"),
                        ));
                    }
                    defs.insert(
                        name,
                        Def {
                            def,
                            line: self.line(stmt.span),
                        },
                    );
                }
                StmtP::Assign(assign) => {
                    let AssignTargetP::Identifier(ident) = &assign.lhs.node else {
                        return Err(self.refuse(
                            stmt.span,
                            Rule::TopLevel,
                            "a top-level assignment must bind one name to a literal",
                        ));
                    };
                    let name = ident.node.ident.clone();
                    let Some(value) = literal(&assign.rhs) else {
                        return Err(self.refuse(
                            stmt.span,
                            Rule::TopLevel,
                            format!(
                                "`{name}` is not assigned a literal; computing at load is a side \
                                 effect (compute inside a function)"
                            ),
                        ));
                    };
                    if defs.contains_key(&name) || constants.contains_key(&name) {
                        return Err(self.refuse(
                            stmt.span,
                            Rule::TopLevel,
                            format!("`{name}` is assigned twice"),
                        ));
                    }
                    constants.insert(name, (value, self.line(stmt.span)));
                }
                StmtP::Expression(expr)
                    if matches!(expr.node, ExprP::Literal(AstLiteral::String(_))) => {}
                _ => {
                    return Err(self.refuse(
                        stmt.span,
                        Rule::TopLevel,
                        "only literal assignments and `def`s may stand at the top level; \
                         anything else would run at load",
                    ));
                }
            }
        }
        Ok((defs, constants))
    }

    /// Refuses a module without `def <name>(<param>)`.
    fn entry(
        &self,
        defs: &BTreeMap<String, Def<'_>>,
        name: &str,
        param: &str,
        role: &str,
    ) -> Result<(), LoadError> {
        match defs.get(name) {
            Some(d) if one_plain_param(d.def) => Ok(()),
            Some(d) => Err(LoadError::new(
                self.file,
                d.line,
                Rule::EntryPoint,
                format!("`{name}` must take exactly one parameter, the {param}"),
            )),
            None => Err(LoadError::new(
                self.file,
                1,
                Rule::EntryPoint,
                format!("`def {name}({param}):` is missing; it is {role}"),
            )),
        }
    }

    /// Walks every function body: the seal's rules inside functions, the call graph (refused
    /// if cyclic), and the free names for the type check.
    fn bodies(
        &self,
        defs: &BTreeMap<String, Def<'_>>,
        constants: &BTreeMap<String, (Value, u32)>,
    ) -> Result<Vec<Reference>, LoadError> {
        let def_names: BTreeSet<String> = defs.keys().cloned().collect();
        let constant_names: BTreeSet<String> = constants.keys().cloned().collect();
        let mut graph: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
        let mut free = Vec::new();
        for (name, def) in defs {
            let mut body = Body {
                defs: &def_names,
                constants: &constant_names,
                locals: BTreeSet::new(),
                calls: BTreeMap::new(),
                free: Vec::new(),
            };
            for param in &def.def.params {
                if let ParameterP::Normal(ident, _, _)
                | ParameterP::Args(ident, _)
                | ParameterP::KwArgs(ident, _) = &param.node
                {
                    body.locals.insert(ident.node.ident.clone());
                }
            }
            bind_stmt(&def.def.body, &mut body.locals);
            self.stmt(&def.def.body, &mut body)?;
            graph.insert(name.clone(), body.calls);
            free.extend(body.free);
        }
        self.acyclic(&graph)?;
        Ok(free)
    }

    fn footprint(&self, found: Option<&(Value, u32)>) -> Result<(Footprint, u32), LoadError> {
        let Some((value, line)) = found else {
            return Err(LoadError::new(
                self.file,
                1,
                Rule::Footprint,
                "FOOTPRINT is missing: list the effect classes the program uses, e.g. \
                 FOOTPRINT = [\"fs-read\"]",
            ));
        };
        let refuse = |detail: String| LoadError::new(self.file, *line, Rule::Footprint, detail);
        let Value::Array(items) = value else {
            return Err(refuse(
                "FOOTPRINT must be a list literal of class names".into(),
            ));
        };
        let mut classes = BTreeSet::new();
        for item in items {
            let Value::String(name) = item else {
                return Err(refuse(format!("{item} is not a class name string")));
            };
            if !classes.insert(class_named(name)) {
                return Err(refuse(format!("class `{name}` is listed twice")));
            }
        }
        Ok((Footprint(classes), *line))
    }

    fn check_params(&self, def: &DefP<AstNoPayload>) -> Result<(), LoadError> {
        for param in &def.params {
            if let ParameterP::Normal(_, _, Some(default)) = &param.node
                && literal(default).is_none()
            {
                return Err(self.refuse(
                    default.span,
                    Rule::TopLevel,
                    "a default value runs at load; use a literal",
                ));
            }
        }
        Ok(())
    }

    fn stmt(&self, stmt: &AstStmt, body: &mut Body<'_>) -> Result<(), LoadError> {
        match &stmt.node {
            StmtP::Break | StmtP::Continue | StmtP::Pass => Ok(()),
            StmtP::Return(expr) => expr.as_ref().map_or(Ok(()), |e| self.expr(e, body)),
            StmtP::Expression(expr) => self.expr(expr, body),
            StmtP::Assign(assign) => {
                self.target(&assign.lhs, body)?;
                self.expr(&assign.rhs, body)
            }
            StmtP::AssignModify(lhs, _, rhs) => {
                self.target(lhs, body)?;
                self.expr(rhs, body)
            }
            StmtP::Statements(list) => list.iter().try_for_each(|s| self.stmt(s, body)),
            StmtP::If(cond, then) => {
                self.expr(cond, body)?;
                self.stmt(then, body)
            }
            StmtP::IfElse(cond, branches) => {
                self.expr(cond, body)?;
                self.stmt(&branches.0, body)?;
                self.stmt(&branches.1, body)
            }
            StmtP::For(for_) => {
                self.target(&for_.var, body)?;
                self.expr(&for_.over, body)?;
                self.stmt(&for_.body, body)
            }
            StmtP::Def(_) => Err(self.refuse(
                stmt.span,
                Rule::NoNestedDef,
                "a `def` inside a `def` is refused; define every function at the top level",
            )),
            StmtP::Load(_) => Err(self.refuse(
                stmt.span,
                Rule::NoLoad,
                "`load` is refused: a program is one module and brings in nothing",
            )),
        }
    }

    /// An assignment target: its names are locals already; its index and dot parts are uses.
    fn target(&self, target: &AstAssignTarget, body: &mut Body<'_>) -> Result<(), LoadError> {
        match &target.node {
            AssignTargetP::Identifier(_) => Ok(()),
            AssignTargetP::Tuple(list) => list.iter().try_for_each(|t| self.target(t, body)),
            AssignTargetP::Index(pair) => {
                self.expr(&pair.0, body)?;
                self.expr(&pair.1, body)
            }
            AssignTargetP::Dot(object, _) => self.expr(object, body),
        }
    }

    fn expr(&self, expr: &AstExpr, body: &mut Body<'_>) -> Result<(), LoadError> {
        match &expr.node {
            ExprP::Identifier(ident) => {
                let name = &ident.node.ident;
                if body.locals.contains(name) || body.constants.contains(name) {
                    Ok(())
                } else if body.defs.contains(name) {
                    Err(self.refuse(
                        expr.span,
                        Rule::FunctionAsValue,
                        format!(
                            "`{name}` is a program function used as a value; functions may only \
                             be called by name"
                        ),
                    ))
                } else {
                    body.free.push(Reference {
                        name: name.clone(),
                        line: self.line(expr.span),
                    });
                    Ok(())
                }
            }
            ExprP::Call(callee, args) => {
                match &callee.node {
                    ExprP::Identifier(ident)
                        if body.defs.contains(&ident.node.ident)
                            && !body.locals.contains(&ident.node.ident) =>
                    {
                        let line = self.line(callee.span);
                        body.calls.entry(ident.node.ident.clone()).or_insert(line);
                    }
                    _ => self.expr(callee, body)?,
                }
                for arg in &args.args {
                    match &arg.node {
                        ArgumentP::Positional(e)
                        | ArgumentP::Named(_, e)
                        | ArgumentP::Args(e)
                        | ArgumentP::KwArgs(e) => self.expr(e, body)?,
                    }
                }
                Ok(())
            }
            ExprP::Lambda(_) => Err(self.refuse(
                expr.span,
                Rule::NoLambda,
                "`lambda` is refused; write a top-level `def` and call it by name",
            )),
            ExprP::Literal(_) => Ok(()),
            ExprP::Tuple(list) | ExprP::List(list) => {
                list.iter().try_for_each(|e| self.expr(e, body))
            }
            ExprP::Dict(pairs) => pairs.iter().try_for_each(|(k, v)| {
                self.expr(k, body)?;
                self.expr(v, body)
            }),
            ExprP::Dot(object, _) => self.expr(object, body),
            ExprP::Index(pair) => {
                self.expr(&pair.0, body)?;
                self.expr(&pair.1, body)
            }
            ExprP::Index2(triple) => {
                self.expr(&triple.0, body)?;
                self.expr(&triple.1, body)?;
                self.expr(&triple.2, body)
            }
            ExprP::Slice(object, a, b, c) => {
                self.expr(object, body)?;
                for part in [a, b, c].into_iter().flatten() {
                    self.expr(part, body)?;
                }
                Ok(())
            }
            ExprP::Not(e) | ExprP::Minus(e) | ExprP::Plus(e) | ExprP::BitNot(e) => {
                self.expr(e, body)
            }
            ExprP::Op(left, _, right) => {
                self.expr(left, body)?;
                self.expr(right, body)
            }
            ExprP::If(triple) => {
                self.expr(&triple.0, body)?;
                self.expr(&triple.1, body)?;
                self.expr(&triple.2, body)
            }
            ExprP::ListComprehension(item, first, clauses) => {
                self.clauses(first, clauses, body)?;
                self.expr(item, body)
            }
            ExprP::DictComprehension(pair, first, clauses) => {
                self.clauses(first, clauses, body)?;
                self.expr(&pair.0, body)?;
                self.expr(&pair.1, body)
            }
            ExprP::FString(f) => f
                .node
                .expressions
                .iter()
                .try_for_each(|e| self.expr(e, body)),
        }
    }

    fn clauses(
        &self,
        first: &ForClauseP<AstNoPayload>,
        rest: &[ClauseP<AstNoPayload>],
        body: &mut Body<'_>,
    ) -> Result<(), LoadError> {
        self.target(&first.var, body)?;
        self.expr(&first.over, body)?;
        for clause in rest {
            match clause {
                ClauseP::For(f) => {
                    self.target(&f.var, body)?;
                    self.expr(&f.over, body)?;
                }
                ClauseP::If(cond) => self.expr(cond, body)?,
            }
        }
        Ok(())
    }

    /// Refuses the first cycle in the call graph, naming its calls and their lines.
    fn acyclic(&self, graph: &BTreeMap<String, BTreeMap<String, u32>>) -> Result<(), LoadError> {
        // Depth-first search with an explicit stack: 0 unvisited, 1 on the path, 2 done.
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        for start in graph.keys() {
            if state.get(start.as_str()).copied().unwrap_or(0) != 0 {
                continue;
            }
            let mut path: Vec<(&str, Vec<(&str, u32)>)> = vec![(start, edges(graph, start))];
            state.insert(start, 1);
            while let Some((node, pending)) = path.last_mut() {
                let node = *node;
                let Some((next, line)) = pending.pop() else {
                    state.insert(node, 2);
                    path.pop();
                    continue;
                };
                match state.get(next).copied().unwrap_or(0) {
                    0 => {
                        state.insert(next, 1);
                        path.push((next, edges(graph, next)));
                    }
                    1 => {
                        let from = path.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        let mut cycle: Vec<&str> = path[from..].iter().map(|(n, _)| *n).collect();
                        cycle.push(next);
                        return Err(LoadError::new(
                            self.file,
                            line,
                            Rule::NoRecursion,
                            format!(
                                "`{node}` calls `{next}` here, closing the cycle {}; programs may \
                                 not recurse",
                                cycle.join(" → ")
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

/// The callees of `node`, in reverse order so that popping visits them in name order.
fn edges<'g>(
    graph: &'g BTreeMap<String, BTreeMap<String, u32>>,
    node: &str,
) -> Vec<(&'g str, u32)> {
    let mut out: Vec<(&str, u32)> = graph
        .get(node)
        .map(|callees| callees.iter().map(|(c, l)| (c.as_str(), *l)).collect())
        .unwrap_or_default();
    out.reverse();
    out
}

/// Whether `def` takes exactly one plain parameter.
fn one_plain_param(def: &DefP<AstNoPayload>) -> bool {
    matches!(def.params.as_slice(), [p] if matches!(p.node, ParameterP::Normal(_, _, None)))
}

/// Every name a statement binds, anywhere in it (Starlark's locals are per function).
fn bind_stmt(stmt: &AstStmt, locals: &mut BTreeSet<String>) {
    match &stmt.node {
        StmtP::Assign(assign) => bind_target(&assign.lhs, locals),
        StmtP::AssignModify(lhs, _, _) => bind_target(lhs, locals),
        StmtP::Statements(list) => list.iter().for_each(|s| bind_stmt(s, locals)),
        StmtP::If(_, then) => bind_stmt(then, locals),
        StmtP::IfElse(_, branches) => {
            bind_stmt(&branches.0, locals);
            bind_stmt(&branches.1, locals);
        }
        StmtP::For(for_) => {
            bind_target(&for_.var, locals);
            bind_stmt(&for_.body, locals);
        }
        _ => {}
    }
    // Comprehension variables are bound inside their comprehension; collecting them here too
    // over-approximates the locals, which only lets the interpreter's own resolution at load
    // refuse what this walk let through.
    visit_comprehensions(stmt, locals);
}

fn bind_target(target: &AstAssignTarget, locals: &mut BTreeSet<String>) {
    match &target.node {
        AssignTargetP::Identifier(ident) => {
            locals.insert(ident.node.ident.clone());
        }
        AssignTargetP::Tuple(list) => list.iter().for_each(|t| bind_target(t, locals)),
        AssignTargetP::Index(_) | AssignTargetP::Dot(..) => {}
    }
}

fn visit_comprehensions(stmt: &AstStmt, locals: &mut BTreeSet<String>) {
    let mut exprs: Vec<&AstExpr> = Vec::new();
    match &stmt.node {
        StmtP::Return(Some(e)) | StmtP::Expression(e) => exprs.push(e),
        StmtP::Assign(a) => exprs.push(&a.rhs),
        StmtP::AssignModify(_, _, e) => exprs.push(e),
        StmtP::If(c, _) | StmtP::IfElse(c, _) => exprs.push(c),
        StmtP::For(f) => exprs.push(&f.over),
        _ => {}
    }
    while let Some(e) = exprs.pop() {
        match &e.node {
            ExprP::ListComprehension(item, first, rest) => {
                bind_target(&first.var, locals);
                exprs.push(item);
                exprs.push(&first.over);
                push_clauses(rest, locals, &mut exprs);
            }
            ExprP::DictComprehension(pair, first, rest) => {
                bind_target(&first.var, locals);
                exprs.push(&pair.0);
                exprs.push(&pair.1);
                exprs.push(&first.over);
                push_clauses(rest, locals, &mut exprs);
            }
            ExprP::Call(callee, args) => {
                exprs.push(callee);
                for arg in &args.args {
                    match &arg.node {
                        ArgumentP::Positional(x)
                        | ArgumentP::Named(_, x)
                        | ArgumentP::Args(x)
                        | ArgumentP::KwArgs(x) => exprs.push(x),
                    }
                }
            }
            ExprP::Tuple(l) | ExprP::List(l) => exprs.extend(l),
            ExprP::Dict(pairs) => pairs.iter().for_each(|(k, v)| {
                exprs.push(k);
                exprs.push(v);
            }),
            ExprP::Op(l, _, r) => {
                exprs.push(l);
                exprs.push(r);
            }
            ExprP::Not(x) | ExprP::Minus(x) | ExprP::Plus(x) | ExprP::BitNot(x) => exprs.push(x),
            ExprP::Dot(x, _) => exprs.push(x),
            ExprP::Index(p) => {
                exprs.push(&p.0);
                exprs.push(&p.1);
            }
            ExprP::If(t) | ExprP::Index2(t) => {
                exprs.push(&t.0);
                exprs.push(&t.1);
                exprs.push(&t.2);
            }
            ExprP::Slice(x, a, b, c) => {
                exprs.push(x);
                exprs.extend([a, b, c].into_iter().flatten().map(|e| &**e));
            }
            _ => {}
        }
    }
}

fn push_clauses<'e>(
    rest: &'e [ClauseP<AstNoPayload>],
    locals: &mut BTreeSet<String>,
    exprs: &mut Vec<&'e AstExpr>,
) {
    for clause in rest {
        match clause {
            ClauseP::For(f) => {
                bind_target(&f.var, locals);
                exprs.push(&f.over);
            }
            ClauseP::If(c) => exprs.push(c),
        }
    }
}

/// The value of a literal expression (numbers, strings, `True`/`False`/`None`, and lists,
/// tuples and string-keyed dicts of literals), or `None` if it is not one.
fn literal(expr: &AstExpr) -> Option<Value> {
    match &expr.node {
        ExprP::Literal(AstLiteral::String(s)) => Some(Value::String(s.node.clone())),
        ExprP::Literal(AstLiteral::Int(i)) => match &i.node {
            TokenInt::I32(n) => Some(Value::from(*n)),
            TokenInt::BigInt(_) => None,
        },
        ExprP::Literal(AstLiteral::Float(f)) => {
            serde_json::Number::from_f64(f.node).map(Value::Number)
        }
        ExprP::Minus(inner) => match literal(inner)? {
            Value::Number(n) => n.as_i64().map(|i| Value::from(-i)).or_else(|| {
                n.as_f64()
                    .and_then(|f| serde_json::Number::from_f64(-f))
                    .map(Value::Number)
            }),
            _ => None,
        },
        ExprP::Identifier(ident) => match ident.node.ident.as_str() {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            "None" => Some(Value::Null),
            _ => None,
        },
        ExprP::List(items) | ExprP::Tuple(items) => items
            .iter()
            .map(literal)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        ExprP::Dict(pairs) => pairs
            .iter()
            .map(|(k, v)| match &k.node {
                ExprP::Literal(AstLiteral::String(key)) => Some((key.node.clone(), literal(v)?)),
                _ => None,
            })
            .collect::<Option<serde_json::Map<_, _>>>()
            .map(Value::Object),
        _ => None,
    }
}

/// The effect class a footprint entry names (an unknown name is an `Other` class, which is wild).
fn class_named(name: &str) -> EffectClass {
    use EffectClass::*;
    [
        FsRead, FsWrite, Blob, TreeView, Clock, GitRead, GitWrite, GitPush, Net, Mail, Airmail,
        Spawn, Build, Run, Shell,
    ]
    .into_iter()
    .find(|c| c.name() == name)
    .unwrap_or_else(|| Other(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEAD: &str =
        "FOOTPRINT = [\"fs-read\"]\nDESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\n";

    fn sealed(body: &str) -> Result<Shape, LoadError> {
        let source = format!("{HEAD}{body}");
        seal("p.star", &parse("p.star", &source)?)
    }

    fn refused(body: &str) -> (Rule, u32) {
        let e = sealed(body).unwrap_err();
        (e.rule, e.line)
    }

    /// `deep_nesting_is_refused_at_its_line`: nesting past `MAX_NESTING` is a refusal at the
    /// line that nests, not a stack overflow in the interpreter; a deep but legal nesting
    /// passes.
    #[test]
    fn deep_nesting_is_refused_at_its_line() {
        let nested = |depth: usize| format!("X = {}1{}\n", "[".repeat(depth), "]".repeat(depth));
        let deep = format!("Y = 1\n{}", nested(5000));
        let e = parse("p.star", &deep).unwrap_err();
        assert_eq!((e.rule, e.line), (Rule::TooLarge, 2), "{e}");
        assert!(parse("p.star", &nested(MAX_NESTING - 4)).is_ok());
        for chain in ["-", "not ", "- +", "~", "1 + ", "x[0]", "x.y", "f()"] {
            let deep = format!("X = {}1\n", chain.repeat(20_000));
            assert_eq!(
                parse("p.star", &deep).unwrap_err().rule,
                Rule::TooLarge,
                "{chain}"
            );
        }
        // Brackets in strings and comments are not nesting.
        let quoted = format!(
            "X = \"{}\"  # {}\nY = '''{}'''\n",
            "[".repeat(99),
            "(".repeat(99),
            "{".repeat(99)
        );
        assert!(parse("p.star", &quoted).is_ok());
    }

    #[test]
    fn a_well_shaped_program_passes_and_its_free_names_are_gathered() {
        let shape = sealed(
            "LIMIT = 3\n\ndef helper(x, n = 2):\n    return [y for y in x][:n]\n\n\
             def main(input):\n    items = fs_list(input[\"dir\"])\n    return helper(items, LIMIT)\n",
        )
        .unwrap();
        assert_eq!(shape.description, "d");
        assert_eq!(shape.footprint_line, 1);
        let free: Vec<&str> = shape.free.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(free, ["fs_list"]);
        assert_eq!(shape.free[0].line, 10);
    }

    #[test]
    fn each_refusal_names_its_rule_and_line() {
        let main = "def main(input):\n    return 1\n";
        assert_eq!(
            refused(&format!("load(\"x.star\", \"y\")\n{main}")),
            (Rule::NoLoad, 4)
        );
        assert_eq!(
            refused("def main(input):\n    while True:\n        pass\n"),
            (Rule::NoWhile, 5)
        );
        assert_eq!(
            refused("def main(input):\n    f = lambda: 1\n    return f()\n"),
            (Rule::NoLambda, 5)
        );
        assert_eq!(
            refused("def main(input):\n    def g():\n        return 1\n    return g()\n"),
            (Rule::NoNestedDef, 5)
        );
        assert_eq!(
            refused(&format!("def f():\n    return f()\n{main}")),
            (Rule::NoRecursion, 5)
        );
        assert_eq!(
            refused("def f():\n    return 1\ndef main(input):\n    return sorted([1], key = f)\n"),
            (Rule::FunctionAsValue, 7)
        );
        assert_eq!(refused(&format!("print(1)\n{main}")), (Rule::TopLevel, 4));
        assert_eq!(
            refused(&format!("X = len([])\n{main}")),
            (Rule::TopLevel, 4)
        );
        assert_eq!(
            refused(&format!("for x in []:\n    pass\n{main}")),
            (Rule::TopLevel, 4)
        );
        assert_eq!(
            refused("def main(a, b):\n    return 1\n"),
            (Rule::EntryPoint, 4)
        );
        assert_eq!(
            refused("def other(input):\n    return 1\n").0,
            Rule::EntryPoint
        );
        assert_eq!(refused("def main(input):\n    return (\n").0, Rule::Syntax);
        let no_footprint = seal(
            "p",
            &parse(
                "p",
                "DESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\ndef main(i):\n    return 1\n",
            )
            .unwrap(),
        )
        .unwrap_err();
        assert_eq!(no_footprint.rule, Rule::Footprint);
        let bad_schema = seal(
            "p",
            &parse(
                "p",
                "FOOTPRINT = []\nDESCRIPTION = \"d\"\nINPUT = [1]\ndef main(i):\n    return 1\n",
            )
            .unwrap(),
        )
        .unwrap_err();
        assert_eq!((bad_schema.rule, bad_schema.line), (Rule::InputSchema, 3));
    }

    #[test]
    fn footprint_names_become_classes_and_unknown_names_are_wild() {
        let shape = seal(
            "p",
            &parse(
                "p",
                "FOOTPRINT = [\"net\", \"aws\"]\nDESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\ndef main(i):\n    return 1\n",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            shape.footprint,
            Footprint::of([EffectClass::Net, EffectClass::Other("aws".into())])
        );
        let twice = "FOOTPRINT = [\"net\", \"net\"]\nDESCRIPTION = \"d\"\nINPUT = {\"type\": \"object\"}\ndef main(i):\n    return 1\n";
        assert_eq!(
            seal("p", &parse("p", twice).unwrap()).unwrap_err().rule,
            Rule::Footprint
        );
    }

    /// Whether the call graph over `n` functions with `edges` has a cycle (by reachability).
    fn has_cycle(n: usize, edges: &[(usize, usize)]) -> bool {
        let mut reach = vec![vec![false; n]; n];
        for &(a, b) in edges {
            reach[a][b] = true;
        }
        for k in 0..n {
            for i in 0..n {
                for j in 0..n {
                    if reach[i][k] && reach[k][j] {
                        reach[i][j] = true;
                    }
                }
            }
        }
        (0..n).any(|i| reach[i][i])
    }

    proptest! {
        /// `seal_admits_no_recursion`: a program whose functions call each other is refused
        /// with `no-recursion` exactly when its call graph has a cycle.
        #[test]
        fn seal_admits_no_recursion(
            n in 1usize..6,
            edges in proptest::collection::vec((0usize..6, 0usize..6), 0..10),
        ) {
            let edges: Vec<(usize, usize)> = edges.into_iter().filter(|(a, b)| *a < n && *b < n).collect();
            let mut body = String::new();
            for f in 0..n {
                body.push_str(&format!("def f{f}(x):\n    y = 0\n"));
                for (_, b) in edges.iter().filter(|(a, _)| *a == f) {
                    body.push_str(&format!("    y += f{b}(x)\n"));
                }
                body.push_str("    return y\n");
            }
            body.push_str("def main(input):\n    return f0(1)\n");
            match sealed(&body) {
                Ok(_) => prop_assert!(!has_cycle(n, &edges)),
                Err(e) => {
                    prop_assert_eq!(e.rule, Rule::NoRecursion);
                    prop_assert!(has_cycle(n, &edges));
                }
            }
        }
    }
}
