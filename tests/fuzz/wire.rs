//! The NATS envelope and every message body l3m sends over it (`l3m_wire`): whatever bytes
//! arrive, `decode` answers a typed refusal (oversized, unknown version, malformed, unknown
//! kind) or a value whose own encoding is bounded by what was received.

use l3m_wire::WireError;
use l3m_wire::envelope::{self, Envelope, Limits, Message};
use l3m_wire::reply;

use crate::harness::{self, Mp, Src};

/// Checks one decoding of `M`: a refusal is one of the decoder's refusals, and a value
/// re-encodes within a bound of the input (no input makes the receiver hold much more than it
/// was sent).
fn check<M: Message>(input: &[u8], limits: &Limits) {
    match envelope::decode::<M>(input, limits) {
        Ok(message) => {
            let again = envelope::encode(&message, &Limits::with_max_bytes(usize::MAX))
                .expect("a decoded message encodes");
            assert!(
                again.len() <= 4 * input.len() + 4096,
                "{}: {} bytes decoded to a message of {} bytes",
                M::KIND,
                input.len(),
                again.len()
            );
        }
        Err(e) => refusal(&e),
    }
    match reply::decode_reply::<M>(input, limits) {
        Ok(_) => {}
        Err(e) => refusal(&e),
    }
}

/// Only the decoder's own refusals may come out of decoding.
fn refusal(e: &WireError) {
    assert!(
        matches!(
            e,
            WireError::Oversized { .. }
                | WireError::Malformed { .. }
                | WireError::UnknownVersion { .. }
                | WireError::UnknownKind { .. }
        ),
        "decoding answered a non-decoding error: {e:?}"
    );
    assert!(!e.to_string().is_empty());
}

/// One message type's entry: its kind, its field names, and its check.
struct Kind {
    kind: &'static str,
    fields: fn() -> Vec<&'static str>,
    check: fn(&[u8], &Limits),
}

macro_rules! kinds {
    ($($ty:path),* $(,)?) => {
        &[$(Kind {
            kind: <$ty as Message>::KIND,
            fields: harness::field_names::<$ty>,
            check: check::<$ty>,
        }),*]
    };
}

use l3m_wire::{build, control, health, hubd, postman, reviewer};

/// Every message type in `l3m_wire`, requests and replies.
const KINDS: &[Kind] = kinds![
    health::HealthRequest,
    health::Health,
    reviewer::ReviewAsk,
    reviewer::ReviewAnswer,
    hubd::persona::PublishPersona,
    hubd::persona::PersonaPublished,
    hubd::persona::PullPersona,
    hubd::persona::PersonaPulled,
    hubd::vigils::ArmVigil,
    hubd::vigils::VigilArmed,
    hubd::vigils::CancelVigil,
    hubd::vigils::VigilCancelled,
    hubd::vigils::ReadVigils,
    hubd::vigils::VigilRange,
    hubd::pack::FetchPack,
    hubd::pack::PackChunk,
    hubd::pack::PushPack,
    hubd::pack::Pushed,
    hubd::undo::AppendUndo,
    hubd::undo::UndoAppended,
    hubd::undo::ReadUndo,
    hubd::undo::UndoRange,
    hubd::build_voucher::VouchBuild,
    hubd::build_voucher::BuildVouched,
    hubd::build_voucher::ReadBuildPolicy,
    hubd::build_voucher::BuildPolicy,
    hubd::mail::SendLetter,
    hubd::mail::LetterSent,
    hubd::mail::ReadInbox,
    hubd::mail::ReadOutbox,
    hubd::mail::InboxLines,
    hubd::mail::MarkRead,
    hubd::mail::MarkedRead,
    hubd::mail::StageAirmail,
    hubd::mail::AirmailStaged,
    hubd::mail::DeliverAirmail,
    hubd::mail::AirmailDelivered,
    hubd::mail::ReadCursor,
    hubd::mail::Cursor,
    hubd::mail::MoveCursor,
    hubd::mail::CursorMoved,
    hubd::mail::ReturnBounces,
    hubd::mail::BouncesReturned,
    hubd::cards::AppendCard,
    hubd::cards::CardAppended,
    hubd::cards::ReadCards,
    hubd::cards::CardRange,
    hubd::credential::IssueCredential,
    hubd::credential::CredentialIssued,
    hubd::credential::RevokeCredential,
    hubd::credential::CredentialRevoked,
    hubd::credential::ListCredentials,
    hubd::credential::Credentials,
    hubd::blessing::Bless,
    hubd::blessing::Blessed,
    hubd::blessing::ReadBlessing,
    hubd::blessing::BlessingView,
    hubd::log::AppendLog,
    hubd::log::LogAppended,
    hubd::log::ReadLog,
    hubd::log::LogRange,
    hubd::authority::ReadGrant,
    hubd::authority::GrantView,
    hubd::authority::Regrant,
    hubd::authority::Regranted,
    hubd::settings::ReadSettings,
    hubd::settings::SettingsView,
    hubd::settings::UpdateSettings,
    hubd::settings::SettingsUpdated,
    hubd::lease::AcquireLease,
    hubd::lease::LeaseHeld,
    hubd::lease::RenewLease,
    hubd::lease::ReleaseLease,
    hubd::lease::LeaseReleased,
    hubd::notify::RefMoved,
    hubd::session::OpenSession,
    hubd::session::SessionOpened,
    hubd::session::Vouch,
    hubd::session::Vouched,
    hubd::tree::Spawn,
    hubd::tree::Spawned,
    hubd::tree::Retire,
    hubd::tree::Retired,
    hubd::tree::Collect,
    hubd::tree::Collected,
    hubd::tree::ListAgents,
    hubd::tree::AgentTree,
    control::Controlled,
    control::ControlReply,
    postman::StatusRequest,
    postman::PostmanStatus,
    build::BuildRequest,
    build::UploadSource,
    build::Uploaded,
    build::BuildReply,
    build::RunRequest,
    build::RunReply,
    reply::RemoteError,
];

/// An envelope from `src`: mostly well-formed around a body built from the chosen type's own
/// field names, so the fuzzer reaches the checks of each field; sometimes with a wrong version,
/// a seal, or extra keys.
fn envelope_of(src: &mut Src<'_>, kind: &Kind, fields: &[&'static str]) -> Vec<u8> {
    let body = match src.below(4) {
        0 => src.bytes(256),
        _ => harness::object(src, fields, 3).encode(),
    };
    let v = match src.below(8) {
        0 => Mp::Uint(u64::from(src.byte())),
        1 => Mp::Str("1".into()),
        _ => Mp::Uint(u64::from(envelope::VERSION)),
    };
    let kind_value = match src.below(10) {
        0 => Mp::Bin(kind.kind.as_bytes().to_vec()),
        1 => Mp::Str(harness::string(src, &[])),
        _ => Mp::Str(kind.kind.to_owned()),
    };
    let mut entries = vec![
        (Mp::Str("v".into()), v),
        (Mp::Str("kind".into()), kind_value),
        (Mp::Str("body".into()), Mp::Bin(body)),
    ];
    if src.below(4) == 0 {
        let mac = src.bytes(40);
        entries.push((
            Mp::Str("seal".into()),
            Mp::Map(vec![
                (Mp::Str("n".into()), Mp::Uint(src.u64())),
                (Mp::Str("mac".into()), Mp::Bin(mac)),
            ]),
        ));
    }
    if src.below(8) == 0 {
        let (k, v) = (harness::string(src, &[]), harness::value(src, &[], 1));
        entries.insert(src.below(entries.len() + 1), (Mp::Str(k), v));
    }
    let mut bytes = Mp::Map(entries).encode();
    if src.below(8) == 0 {
        bytes = harness::mutate(&bytes, src, &[]);
    }
    bytes
}

/// `fuzz_wire_envelope_and_every_body`: raw bytes, and envelopes around bodies shaped like each
/// message type's, decode to a typed refusal or a bounded value, for every type.
#[test]
fn fuzz_wire_envelope_and_every_body() {
    let names: Vec<Vec<&'static str>> = KINDS.iter().map(|k| (k.fields)()).collect();
    let limits = Limits::default();
    let small = Limits::with_max_bytes(64);
    harness::run("wire", 20_000, 1024, |input| {
        let mut src = Src::new(input);
        let at = src.below(KINDS.len());
        let kind = &KINDS[at];
        if src.below(8) == 0 {
            let raw = &input[input.len().min(3)..];
            (kind.check)(raw, &limits);
            if let Err(e) = Envelope::from_bytes(raw, &small) {
                refusal(&e);
            }
            return;
        }
        let bytes = envelope_of(&mut src, kind, &names[at]);
        (kind.check)(&bytes, &limits);
        (kind.check)(&bytes, &small);
    });
}

/// The field names are read: a type whose names came back empty would be fuzzed with bodies
/// of nothing but stray keys, and this target would test less than it says.
#[test]
fn fuzz_wire_knows_each_struct_field() {
    // An empty request has no field; an internally tagged enum reads its tag before its
    // fields, so only [`harness::WORDS`] (which holds its tags) reach it.
    let fieldless = [
        "health",
        "hubd.read-build-policy",
        "sequencer.control-reply",
    ];
    let blind: Vec<&str> = KINDS
        .iter()
        .filter(|k| (k.fields)().is_empty() && !fieldless.contains(&k.kind))
        .map(|k| k.kind)
        .collect();
    assert!(blind.is_empty(), "no field names for {blind:?}");
}
