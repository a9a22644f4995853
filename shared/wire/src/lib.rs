//! `l3m-wire`: subjects, versioned envelopes and the message bus (being written).
