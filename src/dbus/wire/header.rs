//! Message headers serialised once and kept, for the messages the broker
//! sends most: a subscription's `Changed` signals and the replies to one
//! caller's reads (`dbus::served`). Every such message has the same header
//! fields but for a few numbers, so a message is a copy of the kept bytes
//! with those numbers patched, and its body behind them.
//!
//! Why: zbus's builder serialises the header's fields (`a(yv)`, each value
//! a variant whose signature it works out) for every message. That was a
//! fifth of the daemon's time in a fan-out of one focus change to 200
//! subscribers, and 11 % of it under the broker bench's audited
//! `GetActiveWindow` load (issue 33).
//!
//! The D-Bus specification's message format: a primary header of twelve
//! bytes (byte order, type, flags, version, the body's length and the
//! serial, each `UINT32` in the message's byte order), then the header
//! fields as an `ARRAY of STRUCT of (BYTE, VARIANT)`, padded to 8, then the
//! body. zbus writes native-endian messages, and parses the header again
//! when a message is made from bytes ([`zbus::Message::from_bytes`]).

use std::ops::Range;

use zbus::message::{PrimaryHeader, Type};

use crate::dbus::error::{Error, Result};

/// Where the primary header keeps the body's length and the serial.
pub(crate) const BODY_LEN_AT: Range<usize> = 4..8;
pub(crate) const SERIAL_AT: Range<usize> = 8..12;
/// The header fields array's length, and where its first field starts.
const FIELDS_LEN_AT: Range<usize> = 12..16;
/// The code of the `REPLY_SERIAL` header field.
const REPLY_SERIAL: u8 = 5;

/// A header kept from a message the builder made with an empty body.
#[derive(Debug)]
pub(crate) struct KeptHeader {
    /// The header and its padding to the body.
    bytes: Vec<u8>,
    ty: Type,
    /// Where the `REPLY_SERIAL` field's value is, for a reply.
    reply_serial_at: Option<Range<usize>>,
}

impl KeptHeader {
    /// The header of `template`, a message the builder made with the
    /// signature its messages will have and an empty body (never sent).
    pub(crate) fn new(template: &zbus::Message) -> Result<Self> {
        let bytes = template.data().bytes().to_vec();
        let ty = template.primary_header().msg_type();
        if bytes.len() < FIELDS_LEN_AT.end
            || !bytes.len().is_multiple_of(8)
            || !template.body().data().is_empty()
        {
            return Err(Error::Failed(format!(
                "unexpected {ty:?} header of {} bytes",
                bytes.len()
            )));
        }
        let reply_serial_at = match ty {
            Type::MethodReturn | Type::Error => Some(
                field_value(&bytes, REPLY_SERIAL)
                    .ok_or_else(|| Error::Failed("a reply header without its serial".into()))?,
            ),
            _ => None,
        };
        Ok(KeptHeader {
            bytes,
            ty,
            reply_serial_at,
        })
    }

    /// The message with this header, `body` (the serialisation of a value
    /// of the header's signature in a native-endian context at offset 0,
    /// without fds), a serial of its own and, for a reply, `reply_to` as
    /// the serial of the call it answers.
    ///
    /// # Safety
    ///
    /// `body` must be such a serialisation: zbus checks the header again,
    /// not the body.
    pub(crate) unsafe fn message(
        &self,
        reply_to: Option<u32>,
        body: &[u8],
    ) -> Result<zbus::Message> {
        let len = u32::try_from(body.len())
            .map_err(|_| Error::Failed("a message body over 4 GiB".into()))?;
        // A serial from zbus's own counter, as the builder takes it.
        let serial = PrimaryHeader::new(self.ty, len).serial_num();
        let mut bytes = Vec::with_capacity(self.bytes.len() + body.len());
        bytes.extend_from_slice(&self.bytes);
        bytes.extend_from_slice(body);
        bytes[BODY_LEN_AT].copy_from_slice(&len.to_ne_bytes());
        bytes[SERIAL_AT].copy_from_slice(&serial.get().to_ne_bytes());
        match (&self.reply_serial_at, reply_to) {
            (Some(at), Some(call)) => bytes[at.clone()].copy_from_slice(&call.to_ne_bytes()),
            (None, None) => {}
            _ => {
                return Err(Error::Failed(
                    "a reply serial for a message of no reply".into(),
                ));
            }
        }
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        // SAFETY: the header is the builder's own, native-endian, with the
        // body's length, a fresh serial and the call's serial patched in
        // where they are; the body's validity is the caller's promise,
        // aligned at 8 as the header's padding leaves it.
        let msg =
            unsafe { zbus::Message::from_bytes(zbus::wire::serialized::Data::new(bytes, ctxt)) }?;
        Ok(msg)
    }
}

/// Where the `UINT32` value of header field `code` is in `bytes` (a
/// native-endian message's header), or `None` when it has no such field
/// or the fields are not as the specification has them.
fn field_value(bytes: &[u8], code: u8) -> Option<Range<usize>> {
    let u32_at = |at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_ne_bytes(b))
    };
    let align = |at: usize, to: usize| at.div_ceil(to) * to;
    let fields_len = usize::try_from(u32_at(FIELDS_LEN_AT.start)?).ok()?;
    let end = FIELDS_LEN_AT.end.checked_add(fields_len)?;
    let mut at = FIELDS_LEN_AT.end;
    while at < end {
        // A field: its code, then a variant: the signature (its length,
        // its bytes, a NUL), then the value at its alignment.
        let field = *bytes.get(at)?;
        let sig_len = usize::from(*bytes.get(at + 1)?);
        let sig = bytes.get(at + 2..at + 2 + sig_len)?;
        let value = at + 2 + sig_len + 1;
        let value_end = match sig {
            b"u" | b"h" => {
                let v = align(value, 4);
                if field == code {
                    return (sig == b"u").then_some(v..v + 4);
                }
                v + 4
            }
            b"s" | b"o" => {
                let v = align(value, 4);
                v + 4 + usize::try_from(u32_at(v)?).ok()? + 1
            }
            b"g" => value + 1 + usize::from(*bytes.get(value)?) + 1,
            _ => return None,
        };
        at = align(value_end, 8);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply made from the kept header is, byte for byte, the reply the
    /// builder makes to the same call with the same body, but for its
    /// serial; for callers of names of every length (the fields' padding
    /// differs) and calls of any serial.
    #[test]
    fn a_reply_from_the_kept_header_is_the_builders_reply() {
        let ours = zbus::names::UniqueName::try_from(":1.3").expect("name");
        let ctxt = zbus::wire::serialized::Context::new(zbus::wire::NATIVE_ENDIAN, 0);
        let mut dict = std::collections::HashMap::new();
        dict.insert("id".to_owned(), zbus::wire::Variant::from("w1"));
        let body = zbus::wire::to_bytes(ctxt, &dict).expect("body");
        for caller in [":1.7", ":1.42", ":1.1234", ":1.123456789"] {
            let call = |serial: u32| {
                let mut m = zbus::Message::method_call("/org/contextd/Broker1", "GetActiveWindow")
                    .interface("org.contextd.Context1")
                    .sender(caller)
                    .build(&())
                    .expect("call");
                // Serials from zbus's counter differ; pin one.
                let mut b = m.data().bytes().to_vec();
                b[SERIAL_AT].copy_from_slice(&serial.to_ne_bytes());
                // SAFETY: the call's own bytes with another serial.
                m = unsafe {
                    zbus::Message::from_bytes(zbus::wire::serialized::Data::new(b, ctxt))
                }
                .expect("call again");
                m
            };
            let first = call(1);
            let reply_to =
                |m: &zbus::Message| zbus::Message::method_return(&m.header()).sender(&ours);
            // SAFETY: an empty body, never sent: only its header is kept.
            let template = unsafe { reply_to(&first).build_raw_body(&[], "a{sv}", Vec::new()) }
                .expect("template");
            let kept = KeptHeader::new(&template).expect("kept");
            for serial in [2, 255, 65_536, u32::MAX] {
                let c = call(serial);
                // SAFETY: `body` is a native-endian `a{sv}` at offset 0.
                let made = unsafe { kept.message(Some(serial), &body) }.expect("made");
                // SAFETY: as above.
                let built = unsafe { reply_to(&c).build_raw_body(&body, "a{sv}", Vec::new()) }
                    .expect("built");
                let mut a = made.data().bytes().to_vec();
                let mut b = built.data().bytes().to_vec();
                a[SERIAL_AT].fill(0);
                b[SERIAL_AT].fill(0);
                assert_eq!(a, b, "caller {caller}, call {serial}");
                assert_eq!(made.header().reply_serial().map(|s| s.get()), Some(serial));
                assert_eq!(
                    made.header()
                        .destination()
                        .map(|d| d.to_string())
                        .as_deref(),
                    Some(caller)
                );
            }
        }
    }

    #[test]
    fn fields_that_are_not_as_specified_find_nothing() {
        // A fields array that says it is longer than the bytes.
        let mut bytes = vec![0u8; 24];
        bytes[FIELDS_LEN_AT].copy_from_slice(&100u32.to_ne_bytes());
        assert_eq!(field_value(&bytes, REPLY_SERIAL), None);
        // A field of a signature no header field has.
        let mut bytes = vec![0u8; 32];
        bytes[FIELDS_LEN_AT].copy_from_slice(&8u32.to_ne_bytes());
        bytes[16..20].copy_from_slice(&[REPLY_SERIAL, 1, b'x', 0]);
        assert_eq!(field_value(&bytes, REPLY_SERIAL), None);
        // REPLY_SERIAL as a string is not a serial.
        let mut bytes = vec![0u8; 32];
        bytes[FIELDS_LEN_AT].copy_from_slice(&8u32.to_ne_bytes());
        bytes[16..20].copy_from_slice(&[REPLY_SERIAL, 1, b'h', 0]);
        assert_eq!(field_value(&bytes, REPLY_SERIAL), None);
    }
}
