//! `GetProvidedPage`'s answer read from the reply's bytes.
//!
//! A page is 100 records of four string variants. zbus reads a variant
//! through serde one field at a time (a `DeserializeDict` record is four
//! optional variants, each with its signature parsed): with a page of
//! 100 that was two thirds of what the provider bench's reader spent per
//! page, and the page cost the reader about as much as the broker spent
//! answering it (perf, 2026-12-07). GLib's readers look at a `GVariant`'s
//! bytes in place; this does the same for the one shape the broker sends
//! (`aa{sv}` of strings, then `s`). Anything else in a record (a key
//! whose value is not a string, a key a later broker adds with another
//! type) is read by zbus instead, so a reply is never misread: this is a
//! faster path, never a different answer.

use zbus::message::Message;
use zbus::wire::Endian;

use super::proxy::{Context1Proxy, PageRecord};

/// One page of `kind` after `cursor` (empty for the first), at most
/// `limit` records, and the next page's cursor (empty on the last).
pub async fn provided_page(
    ctx: &Context1Proxy<'_>,
    kind: &str,
    limit: u32,
    cursor: &str,
) -> zbus::Result<(Vec<PageRecord>, String)> {
    let reply = ctx
        .inner()
        .call_method("GetProvidedPage", &(kind, limit, cursor))
        .await?;
    read(&reply)
}

/// The records and the cursor of a `GetProvidedPage` reply.
pub fn read(reply: &Message) -> zbus::Result<(Vec<PageRecord>, String)> {
    let body = reply.body();
    if body.signature() == "aa{sv}s" {
        let data = body.data();
        if let Some(page) = read_bytes(data.bytes(), data.context().endian()) {
            return Ok(page);
        }
    }
    body.deserialize()
}

/// The body of `aa{sv}s` when every value is a string and every record
/// has the four keys; `None` for anything else (zbus reads it then).
fn read_bytes(bytes: &[u8], endian: Endian) -> Option<(Vec<PageRecord>, String)> {
    let mut r = Reader {
        bytes,
        at: 0,
        endian,
    };
    let end = r.array_end(4)?;
    let mut records = Vec::new();
    while r.at < end {
        r.align(4)?;
        let record_end = r.array_end(8)?;
        let mut fields: [Option<String>; 4] = Default::default();
        while r.at < record_end {
            r.align(8)?;
            let key = r.string()?;
            if r.signature()? != "s" {
                return None;
            }
            let value = r.string()?;
            let slot = match key {
                "app_id" => 0,
                "json" => 1,
                "kind" => 2,
                "updated" => 3,
                _ => continue,
            };
            fields[slot] = Some(value.to_owned());
        }
        if r.at != record_end {
            return None;
        }
        let [app_id, json, kind, updated] = fields;
        records.push(PageRecord {
            app_id: app_id?,
            kind: kind?,
            updated: updated?,
            json: json?,
        });
    }
    if r.at != end {
        return None;
    }
    let cursor = r.string()?.to_owned();
    (r.at == bytes.len()).then_some((records, cursor))
}

/// A place in a body's bytes (offsets from the body's start, which is
/// 8-aligned in a message, so alignment is reckoned from it).
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    endian: Endian,
}

impl<'a> Reader<'a> {
    fn align(&mut self, n: usize) -> Option<()> {
        let to = self.at.next_multiple_of(n);
        // Padding is zeros.
        self.bytes
            .get(self.at..to)?
            .iter()
            .all(|&b| b == 0)
            .then_some(())?;
        self.at = to;
        Some(())
    }

    fn u32(&mut self) -> Option<u32> {
        self.align(4)?;
        let b: [u8; 4] = self.bytes.get(self.at..self.at + 4)?.try_into().ok()?;
        self.at += 4;
        Some(match self.endian {
            Endian::Little => u32::from_le_bytes(b),
            Endian::Big => u32::from_be_bytes(b),
        })
    }

    /// An array's length, the padding to its elements' alignment, and
    /// where its elements end.
    fn array_end(&mut self, element_align: usize) -> Option<usize> {
        let len = usize::try_from(self.u32()?).ok()?;
        self.align(element_align)?;
        let end = self.at.checked_add(len)?;
        (end <= self.bytes.len()).then_some(end)
    }

    /// `len` bytes of text and their nul.
    fn text(&mut self, len: usize) -> Option<&'a str> {
        let end = self.at.checked_add(len)?;
        let text = std::str::from_utf8(self.bytes.get(self.at..end)?).ok()?;
        (*self.bytes.get(end)? == 0 && !text.contains('\0')).then_some(())?;
        self.at = end + 1;
        Some(text)
    }

    fn string(&mut self) -> Option<&'a str> {
        let len = usize::try_from(self.u32()?).ok()?;
        self.text(len)
    }

    fn signature(&mut self) -> Option<&'a str> {
        let len = usize::from(*self.bytes.get(self.at)?);
        self.at += 1;
        self.text(len)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use zbus::Variant as Value;
    use zbus::wire::serialized::Context;
    use zbus::wire::to_bytes;

    use super::*;

    type Record<'a> = BTreeMap<&'a str, Value<'a>>;

    fn record<'a>(app: &'a str, json: &'a str) -> Record<'a> {
        BTreeMap::from([
            ("app_id", Value::from(app)),
            ("json", Value::from(json)),
            ("kind", Value::from("document")),
            ("updated", Value::from("2026-12-07T12:00:00.000Z")),
        ])
    }

    fn body(endian: Endian, page: &(Vec<Record<'_>>, &str)) -> Vec<u8> {
        to_bytes(Context::new(endian, 0), page)
            .expect("bytes")
            .bytes()
            .to_vec()
    }

    /// What zbus reads from the same bytes.
    fn by_zbus(endian: Endian, bytes: &[u8]) -> (Vec<PageRecord>, String) {
        zbus::wire::serialized::Data::new(bytes, Context::new(endian, 0))
            .deserialize::<(Vec<PageRecord>, String)>()
            .expect("zbus reads it")
            .0
    }

    #[test]
    fn a_page_reads_as_zbus_reads_it_in_both_byte_orders() {
        let apps: Vec<String> = (0..7).map(|i| format!("org.example.App{i}")).collect();
        let texts: Vec<String> = (0..7)
            .map(|i| {
                format!(
                    r#"{{"@type":"DigitalDocument","name":"d{}"}}"#,
                    "é".repeat(i)
                )
            })
            .collect();
        for endian in [Endian::Little, Endian::Big] {
            for n in [0, 1, 7] {
                let page = (
                    (0..n).map(|i| record(&apps[i], &texts[i])).collect(),
                    if n == 7 { "" } else { "Y3Vyc29y" },
                );
                let bytes = body(endian, &page);
                let fast = read_bytes(&bytes, endian).expect("the usual shape");
                assert_eq!(fast, by_zbus(endian, &bytes));
                assert_eq!(fast.0.len(), n);
                assert_eq!(fast.1, page.1);
            }
        }
    }

    #[test]
    fn other_keys_are_skipped_and_other_types_left_to_zbus() {
        let e = Endian::Little;
        let mut extra = record("a", "{}");
        extra.insert("later", Value::from("a string key a later broker adds"));
        let bytes = body(e, &(vec![extra], ""));
        assert_eq!(read_bytes(&bytes, e).expect("read"), by_zbus(e, &bytes));

        let mut typed = record("a", "{}");
        typed.insert("count", Value::from(3u32));
        let bytes = body(e, &(vec![typed], ""));
        assert_eq!(read_bytes(&bytes, e), None, "not a string: zbus's to read");
        assert_eq!(by_zbus(e, &bytes).0[0].app_id, "a");

        let mut missing = record("a", "{}");
        missing.remove("json");
        assert_eq!(read_bytes(&body(e, &(vec![missing], "")), e), None);
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_refused_or_read_as_zbus_reads_it() {
        let e = Endian::Little;
        let bytes = body(e, &(vec![record("a", "{}"), record("b", "[]")], "c"));
        for cut in 0..bytes.len() {
            assert_eq!(read_bytes(&bytes[..cut], e), None, "cut at {cut}");
        }
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                if let Some(fast) = read_bytes(&b, e) {
                    let slow = zbus::wire::serialized::Data::new(&b[..], Context::new(e, 0))
                        .deserialize::<(Vec<PageRecord>, String)>()
                        .map(|(p, _)| p);
                    assert_eq!(Ok(fast), slow.map_err(|_| ()), "byte {i} ^ {flip:#x}");
                }
            }
        }
    }
}
