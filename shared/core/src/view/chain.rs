//! The rewind structure of the records: which state each record leaves the conversation in.

use super::*;

/// One record that changed the view, and the state it was applied on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Node {
    /// Its position among the records.
    pub(super) pos: usize,
    /// The node whose state it was applied on; `None` for the empty conversation. For a rewind,
    /// the state its target names, so the retracted span is off the path.
    pub(super) parent: Option<usize>,
    /// Whether it starts an epoch, so nothing before it matters.
    pub(super) epoch: bool,
}

/// The rewind structure of the records: which state each record leaves the conversation in.
#[derive(Debug, Clone, Default)]
pub(super) struct Chain {
    /// Per record position: its seq, and the node whose state the conversation is in after it.
    pub(super) after: Vec<(u64, Option<usize>)>,
    /// The records that change the view.
    pub(super) nodes: Vec<Node>,
}

/// What pushing one record did to the chain.
pub(super) enum Step {
    /// Nothing changed.
    Inert,
    /// The record is a new node, applied on the current state.
    Applied,
    /// The record is a rewind to a state other than the current one: refold that state, then
    /// apply it.
    Refold(Option<usize>),
}

impl Chain {
    pub(super) fn head(&self) -> Option<usize> {
        self.after.last().and_then(|(_, head)| *head)
    }

    pub(super) fn push(&mut self, record: &Record) -> Step {
        let pos = self.after.len();
        let head = self.head();
        let (parent, step) = match &record.body {
            RecordBody::Rewind { to, .. } => match self.position_of(*to, pos) {
                Some(target) => {
                    let base = self.after[target].1;
                    let step = if base == head {
                        Step::Applied
                    } else {
                        Step::Refold(base)
                    };
                    (base, step)
                }
                None => {
                    self.after.push((record.seq, head));
                    return Step::Inert;
                }
            },
            body if lowers_to_nothing(body) => {
                self.after.push((record.seq, head));
                return Step::Inert;
            }
            _ => (head, Step::Applied),
        };
        let node = self.nodes.len();
        self.nodes.push(Node {
            pos,
            parent,
            epoch: matches!(
                record.body,
                RecordBody::SystemPrompt {
                    continues: false,
                    ..
                }
            ),
        });
        self.after.push((record.seq, Some(node)));
        step
    }

    /// The position of the record with seq `seq`, if it comes before position `before`.
    pub(super) fn position_of(&self, seq: u64, before: usize) -> Option<usize> {
        let pos = usize::try_from(seq).ok().filter(|p| *p < before)?;
        (self.after[pos].0 == seq).then_some(pos)
    }
}

/// The conversation in the state named by `head`: its nodes folded from their epoch's start.
pub(super) fn replay<'a>(
    chain: &Chain,
    head: Option<usize>,
    record_of: impl Fn(usize) -> &'a Record,
) -> Conversation {
    let mut path = Vec::new();
    let mut cursor = head;
    while let Some(node) = cursor {
        path.push(node);
        if chain.nodes[node].epoch {
            break;
        }
        cursor = chain.nodes[node].parent;
    }
    let mut conversation = Conversation::default();
    for &node in path.iter().rev() {
        let record = record_of(node);
        conversation.apply(record.seq, &record.body);
    }
    conversation
}
