//! What a program may name: the Starlark builtins it keeps, and the functions of each effect
//! class admitted for programs. Declared once, here; the checks, the evaluator's globals and the
//! sequencer's answers all read this table.
//!
//! A class's functions exist for a program only when its `FOOTPRINT` declares the class: the
//! type check refuses a name of an undeclared class, and the evaluator's globals are built per
//! footprint, so such a name would not resolve at load either.

use l3m_core::effects::EffectClass;

/// One function a program may call, and the class it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function {
    /// Its name in Starlark, prefixed by its class.
    pub name: &'static str,
    /// The class whose provider answers it.
    pub class: Class,
    /// Its positional parameters, in order.
    pub params: &'static [&'static str],
    /// What it does and returns, as `l3m program check` shows it.
    pub doc: &'static str,
}

/// The classes admitted for programs (a subset of [`EffectClass`]). All are tame but
/// [`Class::Shell`]: a program declaring it is wild, so each call of it is reviewed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// `fs-read`.
    FsRead,
    /// `fs-write`.
    FsWrite,
    /// `clock`.
    Clock,
    /// `net`.
    Net,
    /// `mail`.
    Mail,
    /// `spawn`: driven children only, each retired when the call that spawned it returns.
    Spawn,
    /// `shell`: listed programs in the shell sandbox. Wild: the call is reviewed before the
    /// program starts, with the program's source shown to the reviewer.
    Shell,
}

impl Class {
    /// Every admitted class.
    pub const ALL: [Class; 7] = [
        Class::FsRead,
        Class::FsWrite,
        Class::Clock,
        Class::Net,
        Class::Mail,
        Class::Spawn,
        Class::Shell,
    ];

    /// The effect class it is.
    pub fn effect(self) -> EffectClass {
        match self {
            Class::FsRead => EffectClass::FsRead,
            Class::FsWrite => EffectClass::FsWrite,
            Class::Clock => EffectClass::Clock,
            Class::Net => EffectClass::Net,
            Class::Mail => EffectClass::Mail,
            Class::Spawn => EffectClass::Spawn,
            Class::Shell => EffectClass::Shell,
        }
    }

    /// The admitted class that `class` is, if it is admitted for programs.
    pub fn of(class: &EffectClass) -> Option<Class> {
        Class::ALL.into_iter().find(|c| &c.effect() == class)
    }
}

/// Every function of every admitted class.
pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "fs_read",
        class: Class::FsRead,
        params: &["path"],
        doc: "the UTF-8 text of a file, by path relative to the context root",
    },
    Function {
        name: "fs_list",
        class: Class::FsRead,
        params: &["path"],
        doc: "a directory's entries as a list of {\"name\", \"kind\"} dicts, sorted by name",
    },
    Function {
        name: "fs_write",
        class: Class::FsWrite,
        params: &["path", "text"],
        doc: "creates or replaces a file under a write root (journaled, so rewind undoes it)",
    },
    Function {
        name: "clock_now",
        class: Class::Clock,
        params: &[],
        doc: "milliseconds since the Unix epoch",
    },
    Function {
        name: "net_fetch",
        class: Class::Net,
        params: &["url"],
        doc: "GET of a URL on a granted host: {\"status\", \"body\", \"final_url\"}",
    },
    Function {
        name: "mail_send",
        class: Class::Mail,
        params: &["to", "body"],
        doc: "sends a letter to an address the mail token covers; returns the letter's id",
    },
    Function {
        name: "spawn_child",
        class: Class::Spawn,
        params: &["name", "task", "grant", "loan"],
        doc: "spawns a driven child (full name, first letter, grant dict within the agent's, \
              loan dict such as {\"model-calls\": 3}) through hubd's spawn gate; it is retired \
              when this call returns; returns its name",
    },
    Function {
        name: "await_answer",
        class: Class::Spawn,
        params: &["child", "secs", "menu"],
        doc: "waits up to `secs` (and this call's deadline) for a letter from a child this call \
              spawned, marks it read, and returns the menu word its first word is, \"unclear\" \
              when it is none, or None when no letter came; never the letter's text",
    },
    Function {
        name: "retire_child",
        class: Class::Spawn,
        params: &["child"],
        doc: "retires a child this call spawned before the call returns",
    },
    Function {
        name: "shell_run",
        class: Class::Shell,
        params: &["program", "args"],
        doc: "runs one listed program (`sh`, `grep`, `wc`, …) with a list of string arguments \
              in `workspace`, sandboxed (no network, writes only under the write roots), \
              killed at this call's deadline; returns {\"status\", \"stdout\", \"stderr\", \
              \"killed\"}. Wild: a program that declares `shell` is reviewed before each call",
    },
];

/// The Starlark builtins a program may name: pure functions over values. Left out on purpose:
/// `getattr`, `hasattr` and `dir` (reflection, which could reach a name no check saw), `print`
/// and `debug` (output outside the result), and everything that is not in the standard library.
pub const BUILTINS: &[&str] = &[
    "None",
    "True",
    "False",
    "abs",
    "all",
    "any",
    "bool",
    "chr",
    "dict",
    "enumerate",
    "fail",
    "float",
    "hash",
    "int",
    "isinstance",
    "len",
    "list",
    "max",
    "min",
    "ord",
    "range",
    "repr",
    "reversed",
    "sorted",
    "str",
    "tuple",
    "type",
    "zip",
];

/// The function named `name`, of any class.
pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// The functions of `class`.
pub fn functions_of(class: Class) -> impl Iterator<Item = &'static Function> {
    FUNCTIONS.iter().filter(move |f| f.class == class)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn only_the_shell_is_wild_and_every_class_has_functions() {
        for class in Class::ALL {
            assert_eq!(
                class.effect().ceiling() == l3m_core::effects::Reversibility::Wild,
                class == Class::Shell,
                "{class:?}"
            );
            assert!(functions_of(class).next().is_some(), "{class:?}");
            assert_eq!(Class::of(&class.effect()), Some(class));
        }
        assert_eq!(Class::of(&EffectClass::Other("aws".into())), None);
        assert_eq!(Class::of(&EffectClass::Build), None);
        assert_eq!(Class::of(&EffectClass::Spawn), Some(Class::Spawn));
    }

    #[test]
    fn names_are_unique_and_never_shadow_a_builtin() {
        let mut seen = BTreeSet::new();
        for name in FUNCTIONS
            .iter()
            .map(|f| f.name)
            .chain(BUILTINS.iter().copied())
        {
            assert!(seen.insert(name), "{name} twice");
        }
        assert!(!BUILTINS.contains(&"getattr"));
    }
}
