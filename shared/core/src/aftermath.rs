//! What a rewind to a record takes back and what it cannot: a fold over the records after it.
//!
//! Every tame tool result names the undo entries its call left (`EffectNote.undo`), and
//! every effect no entry covers — a push that left the host, a letter, a spawn, anything wild —
//! is noted without one. A rewind to record `to` undoes exactly the entries named after `to`
//! and reports exactly the rest as not undone; the dry run and the rewind read this one fold, so
//! the forecast is the rewind.

use crate::log::{EffectNote, Record, RecordBody};

/// The effects of the records after a rewind's target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Aftermath {
    /// The undo entry ids to restore, in Log order.
    pub undo: Vec<String>,
    /// The effects no undo entry covers, in Log order: a rewind does not take them back.
    pub lasting: Vec<EffectNote>,
}

/// Folds the tool results among `records` whose seq is after `to`.
pub fn aftermath(records: &[Record], to: u64) -> Aftermath {
    let mut out = Aftermath::default();
    let effects = records
        .iter()
        .filter(|r| r.seq > to)
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult { effects, .. } => Some(effects),
            _ => None,
        })
        .flatten();
    for note in effects {
        match &note.undo {
            Some(id) => out.undo.push(id.clone()),
            None => out.lasting.push(note.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::EffectClass;
    use crate::log::ToolUseId;
    use proptest::prelude::*;

    fn result(seq: u64, notes: Vec<EffectNote>) -> Record {
        Record {
            seq,
            at_ms: 0,
            body: RecordBody::ToolResult {
                id: ToolUseId::new(format!("t{seq}")).unwrap(),
                output: String::new(),
                is_error: false,
                effects: notes,
                refusal: None,
            },
        }
    }

    fn note(class: EffectClass, undo: Option<u64>) -> EffectNote {
        EffectNote {
            class,
            target: "x".into(),
            undo: undo.map(|u| u.to_string()),
        }
    }

    #[test]
    fn undo_entries_and_lasting_effects_after_the_target_only() {
        let records = [
            result(1, vec![note(EffectClass::FsWrite, Some(1))]),
            result(2, vec![note(EffectClass::GitWrite, Some(2))]),
            result(3, vec![note(EffectClass::GitPush, None)]),
        ];
        let after = aftermath(&records, 1);
        assert_eq!(after.undo, ["2"]);
        assert_eq!(after.lasting, [note(EffectClass::GitPush, None)]);
        assert_eq!(aftermath(&records, 3), Aftermath::default());
    }

    proptest! {
        /// Rewinding further back takes back more: the later target's entries and lasting
        /// effects are a suffix of the earlier target's.
        #[test]
        fn an_earlier_target_covers_a_later_ones_aftermath(
            undone in proptest::collection::vec(proptest::option::of(0u64..50), 0..20),
            a in 0u64..25,
            b in 0u64..25,
        ) {
            let records: Vec<Record> = undone
                .iter()
                .enumerate()
                .map(|(i, u)| result(i as u64 + 1, vec![note(EffectClass::FsWrite, *u)]))
                .collect();
            let (early, late) = (aftermath(&records, a.min(b)), aftermath(&records, a.max(b)));
            prop_assert!(early.undo.ends_with(&late.undo));
            prop_assert!(early.lasting.ends_with(&late.lasting));
            let named = undone.iter().skip(a.min(b) as usize).flatten().count();
            prop_assert_eq!(early.undo.len(), named);
        }
    }
}
